"""Fuzzing the command line (issue 16, docs/limits.md): the shipped instances, schedules and
job lists, mutated (numbers made huge, tiny, negative, NaN, infinite or strings; keys
removed, repeated or added; deep nesting; truncation; random bytes; NUL bytes; a BOM),
go through ``show``, ``validate``, ``solve --time-limit 5`` and ``simulate``.

Every run must end with exit code 0, 1 or 2, within a time limit, without a traceback or a
numeric RuntimeWarning, leave any ``--out`` file absent or complete JSON, and explain an
exit 2 in one line that names the file and the place (a JSON path or a line and column).

The default run is about 30 seeded cases, run in process (a few seconds);
``PLACEMENT_FUZZ_CASES=500`` runs more. A failing case prints its seed and mutation.
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from placement.model import limits
from placement.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "instances" / "examples"
INSTANCES = sorted(p for p in EXAMPLES.glob("*.json") if p.stem.count(".") == 0) + \
    sorted((ROOT / "instances" / "bench" / "small").glob("*.json"))[:3]
SCHEDULES = sorted(EXAMPLES.glob("*.valid.json"))
TRACES = sorted((ROOT / "instances" / "traces").glob("*.csv"))
TRACE_ROWS = 6

CASES = int(os.environ.get("PLACEMENT_FUZZ_CASES", "30"))
N_INSTANCE, N_SCHEDULE = max(1, CASES * 2 // 5), max(1, CASES // 4)
N_JOBLIST = max(1, CASES - N_INSTANCE - N_SCHEDULE)
#: seconds one in-process command may take (solve has --time-limit 5; a hang is a failure)
HANG = 90

NUMBERS = [1e308, -1e308, 10**30, -(10**30), 2**64, -1, 0, 1e-300, 5e-324, math.nan, math.inf,
           -math.inf, 1e15 + 1, 1e9 + 1, 0.5, "12", True, None, [], {}]
CELLS = ["1e308", "-1", "nan", "inf", "-inf", "", "abc", "0", "1e-300", "5e-324",
         "99999999999999999999999", "1000000000", "1e9", "0x10", "1_0", " ", "a\x00b", "\x00",
         "1e400", "-0", "+1", "3.0"]
#: a line (and column), a JSON path (``jobs[0].worker["gpu mem"]``) or a whole-file reason
PLACE = re.compile(r'(line \d+)|(: ([A-Za-z_]\w*|\[".*?"\])(\[\d+\]|\.[A-Za-z_]\w*|\[".*?"\])*: )'
                   r"|(: empty file)")


# ----- running one command ----------------------------------------------------------------
class Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise Hang()


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """main(argv) in process, with a watchdog; (exit code, stdout, stderr)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code
    except Hang:
        pytest.fail(f"no answer within {HANG} s: placement {' '.join(argv)}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    numeric = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not numeric, f"numeric warnings: {numeric}"
    return code, out, err


def check(code: int, err: str, files: list[Path], outputs: list[Path], what: str) -> None:
    """The contract of every run (module docstring)."""
    assert code in (0, 1, 2), f"{what}: exit code {code}\n{err}"
    assert "Traceback" not in err, f"{what}: traceback\n{err}"
    if code == 2:
        line = err.strip()
        assert "\n" not in line, f"{what}: more than one line on stderr\n{err}"
        assert line.startswith("placement: error: "), f"{what}: {line}"
        named = [f for f in files if str(f) in line]
        assert named, f"{what}: the message names no input file: {line}"
        assert PLACE.search(line.split(str(named[0]), 1)[1]) or "larger than" in line, \
            f"{what}: the message names no place: {line}"
    for out in outputs:
        if out.exists():
            json.loads(out.read_text(encoding="utf-8"))  # complete, valid JSON
    for stray in outputs[0].parent.glob("*.tmp") if outputs else ():
        pytest.fail(f"{what}: half-written file left behind: {stray}")


# ----- mutations of JSON documents -------------------------------------------------------------
def _paths(doc, path=()):
    """Every (path, value) of the document, containers included."""
    yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, path + (i,))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def _pick(rng, doc, kind):
    found = [(p, v) for p, v in _paths(doc) if isinstance(v, kind) and not isinstance(v, bool)]
    return rng.choice(found) if found else (None, None)


def _dump(doc) -> bytes:
    return json.dumps(doc, indent=1).encode()


def m_number(rng, doc, text):
    path, _ = _pick(rng, doc, (int, float))
    if path is None:
        return text, "no number"
    value = rng.choice(NUMBERS)
    return _dump(_set(doc, path, value)), f"{path} = {value!r}"


def m_literal(rng, doc, text):
    path, _ = _pick(rng, doc, (int, float))
    if path is None:
        return text, "no number"
    literal = rng.choice(["1e400", "-1e400", "9" * 5000, "1" * 400, "1e-400"])
    marked = _dump(_set(doc, path, "@@NUMBER@@")).replace(b'"@@NUMBER@@"', literal.encode())
    return marked, f"{path} = {literal[:12]}..."


def m_remove(rng, doc, text):
    path, node = _pick(rng, doc, dict)
    if not node:
        return text, "no key"
    key = rng.choice(list(node))
    del node[key]
    return _dump(doc), f"removed {path + (key,)}"


def m_add(rng, doc, text):
    path, node = _pick(rng, doc, dict)
    node["zz_unknown"] = rng.choice(NUMBERS[:6])
    return _dump(doc), f"added {path}.zz_unknown"


def m_duplicate(rng, doc, text):
    path, node = _pick(rng, doc, dict)
    if not node:
        return text, "no key"
    key = rng.choice(list(node))
    node["@@DUP@@"] = node[key]
    return _dump(doc).replace(b'"@@DUP@@"', json.dumps(key).encode()), f"duplicated {path + (key,)}"


def m_type(rng, doc, text):
    path, _ = rng.choice(list(_paths(doc))[1:])
    value = rng.choice(["x", "", [], {}, None, True, [1, 2], {"a": 1}])
    return _dump(_set(doc, path, value)), f"{path} = {value!r}"


def m_deep(rng, doc, text):
    path, _ = rng.choice(list(_paths(doc)))
    depth = rng.choice([70, 500, 990, 5000, 100_000])
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    deep = (opener * depth + "1" + closer * depth).encode()
    return _dump(_set(doc, path, "@@DEEP@@")).replace(b'"@@DEEP@@"', deep), f"{path}: nested {depth}"


def m_control(rng, doc, text):
    path, _ = _pick(rng, doc, str)
    if path is None:
        return text, "no string"
    value = rng.choice(["a\x00b", "a\nb", "\x1b[31mred", "a\u2028b", "\ud800", "a\tb"])
    return _dump(_set(doc, path, value)), f"{path} = {value!r}"


def m_truncate(rng, doc, text):
    at = rng.randrange(len(text))
    return text[:at], f"truncated at byte {at}"


def m_bytes(rng, doc, text):
    at = rng.randrange(len(text))
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return text[:at] + junk + text[at:], f"bytes {junk!r} at {at}"


def m_nul(rng, doc, text):
    at = rng.randrange(len(text))
    return text[:at] + b"\x00" + text[at:], f"NUL at {at}"


def m_bom(rng, doc, text):
    return b"\xef\xbb\xbf" + rng.choice([text, text[: len(text) // 2]]), "BOM"


def m_extreme(rng, doc, text):
    """Legal but extreme: a few numbers set to the ends of their bounds (docs/limits.md),
    so the solvers meet the largest and smallest values the policy lets through."""
    changed = []
    numbers = [(p, v) for p, v in _paths(doc) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for path, value in rng.sample(numbers, min(len(numbers), rng.randint(1, 4))):
        key = next((k for k in reversed(path) if isinstance(k, str)), "")
        bound = limits.NUMBERS.get(key, limits.AMOUNT)
        if key in limits.COUNTS or key in ("t",):
            continue
        new = rng.choice([bound.low or 0, bound.high]) if isinstance(value, float) or bound.low \
            else rng.choice([0, bound.high])
        changed.append(f"{path} = {new:g}")
        _set(doc, path, new)
    return _dump(doc), "; ".join(changed) or "nothing"


JSON_MUTATIONS = [m_number, m_literal, m_remove, m_add, m_duplicate, m_type, m_deep, m_control,
                  m_truncate, m_bytes, m_nul, m_bom, m_extreme]


def mutate_json(source: Path, case: int) -> tuple[bytes, str]:
    rng = random.Random(case)
    text = source.read_bytes()
    mutation = JSON_MUTATIONS[case % len(JSON_MUTATIONS)]
    body, what = mutation(rng, json.loads(text), text)
    return body, f"case {case}: {mutation.__name__} of {source.name}: {what}"


# ----- mutations of job lists ---------------------------------------------------------------
def mutate_csv(source: Path, case: int) -> tuple[bytes, str]:
    rng = random.Random(case)
    lines = source.read_text(encoding="utf-8").splitlines()[: TRACE_ROWS + 1]
    rows = [line.split(",") for line in lines]
    kind = ["cell", "extreme", "cell", "drop column", "repeat column", "add column", "short row",
            "truncate", "bytes", "nul", "bom", "quote", "extreme"][case % 13]
    if kind == "extreme":  # legal but extreme: cells at the ends of their bounds
        changed = []
        for _ in range(rng.randint(1, 4)):
            r, c = rng.randrange(1, len(rows)), rng.randrange(1, len(rows[0]))
            column = rows[0][c]
            if column in limits.COUNTS:
                continue
            bound = limits.NUMBERS.get(column, limits.AMOUNT)
            rows[r][c] = repr(float(rng.choice([bound.low, bound.high])))
            changed.append(f"line {r + 1} {column} = {rows[r][c]}")
        what = "; ".join(changed) or "nothing"
    elif kind == "cell":
        r, c = rng.randrange(1, len(rows)), rng.randrange(len(rows[0]))
        rows[r][c] = rng.choice(CELLS)
        what = f"line {r + 1} {rows[0][c]} = {rows[r][c]!r}"
    elif kind == "drop column":
        c = rng.randrange(len(rows[0]))
        what = f"without {rows[0][c]}"
        rows = [row[:c] + row[c + 1:] for row in rows]
    elif kind == "repeat column":
        c = rng.randrange(len(rows[0]))
        what = f"{rows[0][c]} twice"
        rows = [row + [row[c]] for row in rows]
    elif kind == "add column":
        rows = [rows[0] + ["extra"]] + [row + ["1"] for row in rows[1:]]
        what = "column extra"
    elif kind == "short row":
        r = rng.randrange(1, len(rows))
        rows[r] = rows[r][: rng.randrange(len(rows[r]))]
        what = f"line {r + 1} cut"
    text = "\n".join(",".join(row) for row in rows).encode() + b"\n"
    if kind == "truncate":
        at = rng.randrange(len(text))
        text, what = text[:at], f"truncated at {at}"
    elif kind in ("bytes", "nul"):
        at = rng.randrange(len(text))
        junk = b"\x00" if kind == "nul" else bytes(rng.randrange(256) for _ in range(4))
        text, what = text[:at] + junk + text[at:], f"{junk!r} at {at}"
    elif kind == "bom":
        text, what = b"\xef\xbb\xbf" + text, "BOM"
    elif kind == "quote":
        at = rng.randrange(len(text))
        text, what = text[:at] + b'"' + text[at:], f"quote at {at}"
    return text, f"case {case}: {kind} of {source.name} (first {TRACE_ROWS} rows): {what}"


# ----- the fuzz cases -------------------------------------------------------------------------
@pytest.mark.parametrize("case", range(N_INSTANCE))
def test_fuzzed_instances(case, tmp_path, capsys):
    source = INSTANCES[case % len(INSTANCES)]
    body, what = mutate_json(source, case)
    path = tmp_path / f"in{case}.json"
    path.write_bytes(body)
    out = tmp_path / "out.json"
    commands = [["show", str(path), "--jobs"],
                ["solve", str(path), "--time-limit", "5", "--trials", "4", "--out", str(out)]]
    schedule = source.with_name(f"{source.stem}.valid.json")
    if schedule.exists():
        commands.append(["validate", str(path), str(schedule)])
    for argv in commands:
        code, _, err = run(argv, capsys)
        check(code, err, [path], [out], f"{what}: placement {argv[0]}")


@pytest.mark.parametrize("case", range(N_SCHEDULE))
def test_fuzzed_schedules(case, tmp_path, capsys):
    source = SCHEDULES[case % len(SCHEDULES)]
    body, what = mutate_json(source, case)
    path = tmp_path / f"s{case}.json"
    path.write_bytes(body)
    instance = source.with_name(source.name.replace(".valid", ""))
    for argv in (["validate", str(instance), str(path)], ["validate", str(instance), str(path), "--json"]):
        code, _, err = run(argv, capsys)
        check(code, err, [path], [], f"{what}: placement {' '.join(argv[:1] + argv[3:])}")


@pytest.mark.parametrize("case", range(N_JOBLIST))
def test_fuzzed_job_lists(case, tmp_path, capsys):
    source = TRACES[case % len(TRACES)]
    body, what = mutate_csv(source, case)
    path = tmp_path / f"jobs{case}.csv"
    path.write_bytes(body)
    out = tmp_path / "sim.json"
    policy = "lp-rounding" if case % 3 == 1 else "greedy"
    argv = ["simulate", "--trace", str(path), "--cluster", "racks:2x2", "--horizon", "20",
            "--policy", policy, "--out", str(out)]
    code, _, err = run(argv, capsys)
    check(code, err, [path], [out], f"{what}: placement simulate")


@pytest.mark.parametrize("name, body", [
    ("deep.json", b"[" * 990 + b"]" * 990),
    ("bytes.json", bytes(random.Random(0).randrange(256) for _ in range(2000))),
    ("dup.json", b'{"name": "x", "name": "y"}'),
])
def test_fuzz_in_a_real_process(name, body, tmp_path):
    """The few cases worth a real interpreter: what reaches the terminal, and no hang."""
    path = tmp_path / name
    path.write_bytes(body)
    for argv in (["show", str(path)], ["solve", str(path), "--time-limit", "5"],
                 ["validate", str(EXAMPLES / "racks.json"), str(path)]):
        done = subprocess.run([sys.executable, "-m", "placement.cli", *argv], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        check(done.returncode, done.stderr, [path], [], f"{name}: placement {argv[0]}")
        assert done.returncode == 2
