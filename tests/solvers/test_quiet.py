"""HiGHS' copyright banner never reaches the caller's stdout (file descriptor 1), first call or later."""

import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import solvers
from solvers.mip import solve_mip
from solvers.banner import _construct_fd1, construct_without_banner
from solvers.lp import solve_lp
from solvers.problem import Problem

ROOT = Path(solvers.__file__).resolve().parents[1]

PROBLEM = "Problem(c=[1.0, 2.0], C=[[1, 1]], d=[2], upper=[3, 3])"


def small():
    return Problem(c=[1.0, 2.0], C=[[1, 1]], d=[2], upper=[3, 3])


def fresh_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, env=env, timeout=120)


def test_solve_lp_prints_nothing(capfd):
    assert solve_lp(small()).success
    assert capfd.readouterr().out == ""


def test_solve_exact_prints_nothing(capfd):
    assert solve_mip(small()).success
    assert capfd.readouterr().out == ""


@pytest.mark.parametrize("call", [
    "solve_lp(p, backend='highs')",
    "solve_mip(p, backend='highs')",
])
def test_first_call_in_a_fresh_process_prints_nothing(call):
    code = ("from solvers.mip import solve_mip\nfrom solvers.lp import solve_lp\n"
            f"from solvers.problem import Problem\np = {PROBLEM}\n"
            f"r = {call}\nassert r.success, r\nr = {call}\nassert r.success, r\n")
    run = fresh_python(code)
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout == b""


def test_caller_output_around_the_first_solve_is_kept_in_order():
    code = ("import threading\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "from solvers.lp import solve_lp\nfrom solvers.problem import Problem\n"
            f"p = {PROBLEM}\nprint('before')\n"
            "t = threading.Thread(target=lambda: [print('line', i, flush=True) for i in range(100)])\nt.start()\n"
            "with ThreadPoolExecutor(4) as pool:\n"
            "    assert all(r.success for r in pool.map(lambda _: solve_lp(p), range(16)))\n"
            "t.join()\nprint('after')\n")
    run = fresh_python(code)
    assert run.returncode == 0, run.stderr.decode()
    lines = run.stdout.decode().splitlines()
    assert lines[0] == "before" and lines[-1] == "after"
    assert sorted(lines[1:-1], key=lambda s: int(s.split()[1])) == [f"line {i}" for i in range(100)]


def test_capture_passes_on_everything_but_the_banner(capfd):
    def construct():
        os.write(1, b"Running HiGHS 9.9.9 (git hash: x): Copyright (c) 2099 under MIT licence terms\n")
        os.write(1, b"Includes third-party software components, see THIRD_PARTY_NOTICES.md for full details\n")
        os.write(1, b"something else\n")
        return threading.get_ident()

    obj, printed = _construct_fd1(construct)
    assert obj == threading.get_ident() and b"Copyright" in printed
    assert capfd.readouterr().out == "something else\n"


def test_c_stdout_capture_passes_on_everything_but_the_banner(capfd):
    libc = ctypes.CDLL(None)

    def construct():
        libc.puts(b"Running HiGHS 9.9.9 (git hash: x): Copyright (c) 2099 under MIT licence terms")
        libc.puts(b"something else from C")
        os.write(1, b"python wrote this meanwhile\n")  # fd 1 is not redirected: goes straight out
        return 7

    obj, printed = construct_without_banner(construct)
    assert obj == 7 and b"Copyright" in printed and b"python wrote" not in printed
    assert capfd.readouterr().out == "python wrote this meanwhile\nsomething else from C\n"
