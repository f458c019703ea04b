"""Peer arena: our online policies and the peers' own, in the Pollux paper's simulator.

    python benchmarks/peer_pollux.py --simulator DIR --workload DIR/workloads/workload-6.csv

runs, one after the other, every (workload, mode, policy) of the plan inside the peer's
simulator, unchanged (the runner ``placement.integrations.pollux``, whose
``pollux_adapter`` makes our policies its policies), and replays the same workloads in our
own simulator (``placement.traces.pollux`` converts them); it writes ``--out`` (JSON:
``{"runs": [...], "replays": [...]}``), a Markdown report beside it (``--report``, default
``benchmarks/PEER.md``) and a picture of the averages.

- DIR is the user's checkout of the simulator (petuum/adaptdl, branch ``osdi21-artifact``,
  folder ``simulator/``): ``git clone -b osdi21-artifact https://github.com/petuum/adaptdl``
  then ``--simulator adaptdl/simulator``. Nothing of it is copied into the project.
- The simulator needs ``numpy<2`` and ``pandas<2`` (and pymoo 0.4.2.1), which cannot live
  beside this project's OR-Tools (it needs pandas>=2). So the runs happen in an
  environment of their own: ``--peer-python PY`` names its interpreter; without it the
  script uses ``.peer-venv/`` in the project and creates it on first use with
  ``pip install "numpy<2" "pandas<2" scipy "pymoo==0.4.2.1" highspy networkx tqdm pulp``
  and this project installed without its dependencies (``pip install --no-deps -e .``).
- Plan: ``--mode M --policy NAME ...`` runs those policies in each mode given; with
  neither, the full plan of ``DEFAULT_PLAN``. NAME is one of ours (``placement.online.
  registry``) or ``peer:tiresias`` / ``peer:optimus`` / ``peer:pollux`` (each only in its
  own mode). Finished runs are cached in ``--cache`` (default ``.peer-cache/``) by the
  workload's content, mode, policy, the settings, the simulator's files and, for our
  policies, the project's code: a rerun only runs what changed.
- Information (docs/model.md, "What the scheduler knows"): ``--information parity`` (the
  default) runs our policies at each mode's peer's information, ``fixed`` and ``adaptive``
  at ``none`` (Tiresias and Pollux know no lengths), ``tuned`` at ``oracle`` (as
  Optimus+Oracle); ``oracle``, ``estimate`` (users' estimates: the truth times
  exp(``--estimate-error`` N(0,1)), seeded by ``--seed``) or ``none`` run them all at that
  level. Every run's information is in the report.
- Bad input (a missing or wrong DIR, an unreadable workload, an unknown policy or a mode
  a peer policy cannot run in, an environment that cannot be made) is one line on stderr,
  exit 2, and nothing written.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import cpu_model  # noqa: E402

from placement.integrations.pollux import ARENA_OPTIONS, PEER_INFORMATION, PEER_PACKAGES, PEER_POLICIES  # noqa: E402
from placement.integrations.pollux_adapter import MODES  # noqa: E402
from placement.online.knowledge import INFORMATION, information_label  # noqa: E402
from placement.online.registry import POLICIES  # noqa: E402

#: mode -> policies, the issue's arena: each peer beside our reimplementation of it,
#: the baselines of that mode, and our own policies.
DEFAULT_PLAN = {
    "fixed": ["peer:tiresias", "tiresias", "fifo", "greedy", "lp-rounding"],
    "tuned": ["peer:optimus", "optimus", "drf", "tetris", "greedy", "lp-rounding"],
    "adaptive": ["peer:pollux", "pollux", "greedy", "lp-rounding", "lp-no-share"],
}
#: mode -> the information of its peer, at which ``--information parity`` runs our policies
PARITY = {PEER_POLICIES[p]: level for p, level in PEER_INFORMATION.items()}
#: our reimplementation of each peer policy, for the fidelity targets.
TWINS = {"peer:tiresias": "tiresias", "peer:optimus": "optimus", "peer:pollux": "pollux"}
FIDELITY = 0.15
#: the modes our own simulator can replay (jobs with a fixed batch size).
REPLAY_MODES = ("fixed", "tuned")
SIM_FILES = ("simulator.py", "applications.py", "tiresias.py", "optimus.py", "pollux.py", "traces")
ENV_PACKAGES = ["numpy<2", "pandas<2", "scipy", "pymoo==0.4.2.1", "highspy", "networkx", "tqdm", "pulp"]


class BadInput(Exception):
    """One line for the user: what is wrong and how to fix it."""


# ----- inputs ----------------------------------------------------------------------------------
def check_simulator(folder: Path) -> None:
    if not folder.is_dir():
        raise BadInput(f"{folder}: no such folder; clone the simulator (git clone -b "
                       "osdi21-artifact https://github.com/petuum/adaptdl) and pass adaptdl/simulator")
    missing = [f for f in SIM_FILES if not (folder / f).exists()]
    if missing:
        raise BadInput(f"{folder}: not the Pollux simulator folder (missing {', '.join(missing)})")


def check_workload(path: Path, sim: Path) -> bytes:
    """The workload's bytes, after checking every row as the converter reads it (the
    columns, numbers, applications, batch sizes inside the measured range, gangs no larger
    than the simulator's 64 GPUs): a bad row stops the benchmark before anything runs,
    instead of failing in the simulator."""
    try:
        data = path.read_bytes()
        data.decode("utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such workload file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read the workload: {exc}") from None
    from placement.model.strict_json import InstanceError
    from placement.traces.pollux import read_pollux_workload
    try:
        for mode in REPLAY_MODES:
            read_pollux_workload(path, sim / "traces", mode)
    except InstanceError as exc:
        raise BadInput(str(exc)) from None
    return data


def plan(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(mode, policy) pairs in run order."""
    if not args.mode and not args.policy:
        return [(m, p) for m, ps in DEFAULT_PLAN.items() for p in ps]
    modes = args.mode or list(MODES)
    policies = args.policy or []
    if not policies:
        return [(m, p) for m in modes for p in DEFAULT_PLAN[m]]
    out = []
    for m in modes:
        for p in policies:
            if p in PEER_POLICIES:
                if PEER_POLICIES[p] != m:
                    if len(modes) == 1:
                        raise BadInput(f"{p} runs only in mode {PEER_POLICIES[p]} (its own jobs' behaviour)")
                    continue
            elif p not in POLICIES:
                raise BadInput(f"unknown policy {p!r}; choose from {', '.join([*POLICIES, *PEER_POLICIES])}")
            out.append((m, p))
    return out


# ----- the simulator's environment ---------------------------------------------------------------
def _probe(python: Path) -> str | None:
    """None if ``python`` can run the simulator and our package, else what is missing."""
    code = ("import numpy, pandas, pymoo, scipy, placement.integrations.pollux; "
            "assert int(numpy.__version__.split('.')[0]) < 2 and int(pandas.__version__.split('.')[0]) < 2, "
            "'needs numpy<2 and pandas<2, found numpy ' + numpy.__version__ + ', pandas ' + pandas.__version__")
    try:
        p = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if p.returncode == 0:
        return None
    lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {p.returncode}"


def peer_python(given: str | None, env_dir: Path) -> Path:
    """The interpreter of the simulator's environment: given, found, or made."""
    if given:
        py = Path(given)
        why = _probe(py)
        if why:
            raise BadInput(f"--peer-python {py}: cannot run the simulator ({why}); in that environment: "
                           f"pip install {PEER_PACKAGES} highspy networkx tqdm pulp && pip install --no-deps -e {ROOT}")
        return py
    py = env_dir / "bin" / "python"
    if py.exists() and _probe(py) is None:
        return py
    print(f"peer_pollux: making the simulator's environment in {env_dir} (once) ...", file=sys.stderr)
    steps = [[sys.executable, "-m", "venv", str(env_dir)],
             [str(py), "-m", "pip", "install", "--quiet", *ENV_PACKAGES],
             [str(py), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(ROOT)]]
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            raise BadInput(f"cannot make {env_dir} ({shlex.join(cmd[2:5])}...: {last}); make it by hand "
                           "and pass --peer-python (see this script's docstring)")
    why = _probe(py)
    if why:
        raise BadInput(f"{env_dir}: made, but it cannot run the simulator: {why}")
    return py


# ----- cache keys --------------------------------------------------------------------------------
def tree_hash(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(p.anchor)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def code_hash(paths: list[Path]) -> str:
    """A hash of what Python files do: each one's syntax tree without its docstrings, so a
    corrected sentence in a docstring does not throw away hours of runs, while any change
    of code does."""
    h = hashlib.sha256()
    for p in sorted(paths):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(ast.dump(tree).encode())
    return h.hexdigest()[:16]


def code_version() -> str:
    """The project's library code (uncommitted changes included)."""
    return code_hash([p for d in ("placement", "solvers") for p in (ROOT / d).rglob("*.py")])


def runner_version() -> str:
    """The runner's own code, part of every run's key (it measures the peers' runs too)."""
    return code_hash([ROOT / "placement" / "integrations" / "pollux.py"])


def simulator_version(folder: Path) -> str:
    files = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
             and (p.suffix in (".py", ".csv") and "workloads" not in p.parts)]
    return tree_hash(files)


def cache_key(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:24]


# ----- runs --------------------------------------------------------------------------------------
def run_in_peer(py: Path, sim: Path, workload: Path, mode: str, policy: str, out: Path,
                args: argparse.Namespace) -> dict[str, Any]:
    cmd = [str(py), "-m", "placement.integrations.pollux", "--simulator", str(sim), "--workload",
           str(workload), "--mode", mode, "--policy", policy, "--out", str(out),
           "--interval", str(args.interval), "--lookahead", str(args.lookahead)]
    if policy not in PEER_POLICIES:
        cmd += ["--information", information(args, mode), "--estimate-error", str(args.estimate_error),
                "--seed", str(args.seed)]
    if sys.stderr.isatty():
        cmd.append("--progress")
    p = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                       stderr=None if sys.stderr.isatty() else subprocess.PIPE, text=True)
    if p.returncode != 0:
        tail = (p.stderr or "").strip().splitlines()[-1:] if p.stderr else []
        raise RuntimeError(f"{workload.stem} {mode} {policy}: the run failed (exit {p.returncode}) "
                           + (tail[0] if tail else ""))
    return json.loads(out.read_text())


def information(args: argparse.Namespace, mode: str) -> str:
    """What our policies are told in ``mode``: the peer's information under ``parity``."""
    return PARITY[mode] if args.information == "parity" else args.information


def replay(workload: Path, sim: Path, mode: str, policy: str, args: argparse.Namespace) -> dict[str, Any]:
    """The same workload and policy in our own simulator (MODEL.md's progress)."""
    from placement.simulate import simulate
    from placement.traces.pollux import pollux_cluster, read_pollux_workload
    jobs = read_pollux_workload(workload, sim / "traces", mode, slot_seconds=args.interval)
    policy_obj = POLICIES[policy](**ARENA_OPTIONS.get(policy, {}))
    start = time.perf_counter()
    r = simulate(jobs, topology=pollux_cluster(), policy=policy_obj, slot_seconds=args.interval,
                 resources=("gpu",), lookahead=args.lookahead, information=information(args, mode),
                 estimate_error=args.estimate_error, seed=args.seed)
    return {"workload": workload.stem, "mode": mode, "policy": policy, "average_jct": r.average_jct,
            "unfinished": list(r.unfinished), "makespan": r.makespan,
            "decision_median_s": r.decision_time["median"], "wall_s": time.perf_counter() - start,
            "reconfigurations": r.reconfigurations}


def write_outputs(doc: dict[str, Any], out: Path, report: Path, markdown: Any) -> None:
    """The results as JSON at ``out`` and ``markdown(doc)`` at ``report``, each written whole
    (a temp file renamed), folders made; said on stderr."""
    for path, text in ((out, json.dumps(doc, indent=1)), (report, markdown(doc))):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    print(f"wrote {out} and {report}", file=sys.stderr)


def cached(cache: Path, key: str, make) -> tuple[dict[str, Any], bool]:
    path = cache / f"{key}.json"
    if path.exists():
        try:
            return json.loads(path.read_text()), True
        except (OSError, json.JSONDecodeError):
            path.unlink(missing_ok=True)
    tmp = cache / f"{key}.{os.getpid()}.tmp"
    result = make(tmp)
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)
    return result, False


# ----- report ------------------------------------------------------------------------------------
def _s(x: Any) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _rank(values: dict[str, float]) -> list[str]:
    return sorted(values, key=lambda k: (values[k], k))


def kendall_tau(a: list[str], b: list[str]) -> float | None:
    """Agreement of two orders of the same items (1: same order, -1: reversed)."""
    items = [x for x in a if x in b]
    if len(items) < 2:
        return None
    pa = {x: i for i, x in enumerate(a)}
    pb = {x: i for i, x in enumerate(b)}
    agree = total = 0
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            x, y = items[i], items[j]
            total += 1
            agree += 1 if (pa[x] - pa[y]) * (pb[x] - pb[y]) > 0 else -1
    return agree / total


def targets(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        twin = TWINS.get(r["policy"])
        if twin is None:
            continue
        ours = next((x for x in runs if x["workload"] == r["workload"] and x["mode"] == r["mode"]
                     and x["policy"] == twin), None)
        if ours is None or not r["average_jct"] or ours["average_jct"] is None:
            continue
        if r["unfinished"] or ours["unfinished"]:
            out.append({"workload": r["workload"], "mode": r["mode"], "peer": r["policy"], "ours": twin,
                        "peer_jct": r["average_jct"], "our_jct": ours["average_jct"], "ratio": None,
                        "met": False})
            continue
        ratio = ours["average_jct"] / r["average_jct"]
        out.append({"workload": r["workload"], "mode": r["mode"], "peer": r["policy"], "ours": twin,
                    "peer_jct": r["average_jct"], "our_jct": ours["average_jct"], "ratio": ratio,
                    "met": abs(ratio - 1) <= FIDELITY})
    return out


def markdown(doc: dict[str, Any]) -> str:
    runs, replays = doc["runs"], doc["replays"]
    L = ["# Peer arena: the Pollux simulator", "",
         f"Command: `{doc['command']}`  ", f"Date: {doc['date']}; machine: {doc['machine']['cpu']}, "
         f"{doc['machine']['nproc']} cores, Python {doc['machine']['python']}; load average "
         f"{doc['load_before']} before, {doc['load_after']} after; project code {doc['code_version']}, "
         f"simulator files {doc['simulator_version']}; {doc['ran']} runs made now, {doc['cached']} from the cache"
         + (" (their decision and wall times are those measured when each run was made, under the load "
            "of that time, not now)" if doc["cached"] else "") + ".", "",
         "Every run plays the workload in the peer's own simulator, unchanged (16 nodes x 4 GPUs, "
         f"{doc['interval']}-s interval); only the policy deciding differs. `peer:*` are the "
         "simulator's own policies; the others are ours, through `placement.integrations.pollux` "
         "(docs/online.md, \"Peer arena\", says what each mode gives them and what the translation "
         "to our model loses). Our `tiresias` runs with the peer's constants (one 57,600 GPU-s "
         "threshold, no promotion). Average JCT is over the jobs that finished, in seconds (a run "
         "stops after 30 simulated days; the `unfinished` column counts the jobs left then, and "
         "an average over fewer jobs is marked \u2020 and not compared); restarts are the "
         "simulator's re-allocations; decision time is the wall time of one `optimize` call.", ""]
    tg = targets(runs)
    if tg:
        L += ["## Targets: our reimplementations within +-15% of the peer's", "",
              "| workload | mode | peer | peer avg JCT (s) | ours | our avg JCT (s) | ours / peer | within 15% |",
              "|---|---|---|---:|---|---:|---:|---|"]
        for t in tg:
            ratio = "unfinished jobs" if t["ratio"] is None else f"{t['ratio']:.3f}"
            L.append(f"| {t['workload']} | {t['mode']} | `{t['peer']}` | {_s(t['peer_jct'])} | `{t['ours']}` | "
                     f"{_s(t['our_jct'])} | {ratio} | {'yes' if t['met'] else '**no**'} |")
        L.append("")
    for wl in dict.fromkeys(r["workload"] for r in runs):
        for mode in dict.fromkeys(r["mode"] for r in runs if r["workload"] == wl):
            rs = [r for r in runs if r["workload"] == wl and r["mode"] == mode]
            rep = {x["policy"]: x for x in replays if x["workload"] == wl and x["mode"] == mode}
            peer = next((r for r in rs if r["policy"] in PEER_POLICIES), None)
            L += [f"## {wl}, mode `{mode}`", "",
                  "| policy | avg JCT (s) | / " + (f"`{peer['policy']}`" if peer else "peer") +
                  " | information | unfinished | makespan (s) | restarts | decision median (ms) | p95 (ms) | "
                  "wall (s) | our simulator: avg JCT (s) |", "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
            for r in sorted(rs, key=lambda r: (r["average_jct"] is None, r["average_jct"] or 0)):
                rel = (f"{r['average_jct'] / peer['average_jct']:.3f}" if peer and r["average_jct"]
                       and peer["average_jct"] and not r["unfinished"] and not peer["unfinished"] else "-")
                ours = rep.get(r["policy"])
                mark = " \u2020" if r["unfinished"] else ""
                L.append(f"| `{r['policy']}` | {_s(r['average_jct'])}{mark} | {rel} | {_information(r)} | "
                         f"{len(r['unfinished'])} | "
                         f"{_s(r['makespan'])} | {r['restarts']} | {r['decision_median_s'] * 1e3:.1f} | "
                         f"{r['decision_p95_s'] * 1e3:.1f} | {r['wall_s']:.0f} | "
                         f"{_s(ours['average_jct']) if ours else '-'} |")
            both = {p for p in rep if any(r["policy"] == p for r in rs)}
            if len(both) >= 2:
                a = _rank({r["policy"]: r["average_jct"] for r in rs if r["policy"] in both})
                b = _rank({p: rep[p]["average_jct"] for p in both})
                tau = kendall_tau(a, b)
                L += ["", f"Order of our policies, best first: peer's simulator {' < '.join(a)}; our "
                      f"simulator {' < '.join(b)}; " + ("the same order." if a == b else
                                                        f"Kendall tau {tau:.2f}.")]
            L.append("")
    if doc.get("plot"):
        L += [f"![average JCT per policy]({doc['plot']})", ""]
    L += ["## Reading the numbers", "",
          "- Our simulator replays the workload converted by `placement.traces.pollux` (jobs run "
          "their batch size; speed as a table of the traces' rates per worker count, local and "
          "by machines spanned; JCT counted in whole 60-s slots from the slot of submission), so "
          "its averages differ from the peer's; what should agree is the order of the policies.",
          "- Information: the column says what each run's policy was told of job lengths "
          "(docs/model.md, 'What the scheduler knows'): `oracle` the true remaining work, "
          "`estimate` a user's estimate corrected by the jobs that finished, `none` only what a job "
          "has done and the sizes of finished jobs; a peer's is its paper's (Tiresias and Pollux "
          "`none`, Optimus+Oracle `oracle`). A comparison is at parity only where the two match.",
          "- Speed: our `greedy`, `lp-rounding`, `optimus`, `drf` and `tetris` see each "
          "job's speed table, and at `oracle` its remaining work: the true speed in `fixed` and `tuned` modes, "
          "as the peer's Optimus+Oracle does, and in `adaptive` mode the speedup the peer's Pollux "
          "has fitted (times the true one-GPU rate), with each job's useful GPU count from the "
          "traces and no exploration cap (docs/online.md, 'The GPU count of an adaptive job': "
          "more than `peer:pollux` knows); `peer:tiresias` and our `fifo` use neither; "
          "our `tiresias` reads only the ratio of a job's spread and local speed (its "
          "skip-consolidation rule); `peer:pollux` sees only the speedup it has fitted, as our "
          "`pollux` and `lp-rounding` below `oracle` do (no job length; each job up to Pollux's own "
          "exploration cap, `lp-rounding` capping each elastic job whose speedup bends at the power-mean "
          "share, docs/online.md, 'Shares'), where `lp-no-share` below `oracle` gets the useful count of "
          "that speedup under the cap.",
          ""]
    return "\n".join(L)


def _information(run: dict[str, Any]) -> str:
    """What the run's policy knew of job lengths (a peer: its paper's; a cached run of an
    earlier version without the field: ``oracle``, all ours were then)."""
    return information_label(run.get("information") or "oracle", run.get("estimate_error") or 0)


def plot(doc: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    groups = list(dict.fromkeys((r["workload"], r["mode"]) for r in doc["runs"]))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False)
    for ax, (wl, mode) in zip(axes[0], groups):
        rs = [r for r in doc["runs"] if r["workload"] == wl and r["mode"] == mode and r["average_jct"]]
        rs.sort(key=lambda r: r["average_jct"])
        colors = ["#888888" if r["policy"] in PEER_POLICIES else "#1f77b4" for r in rs]
        ax.barh([r["policy"] for r in rs], [r["average_jct"] / 3600 for r in rs], color=colors)
        ax.invert_yaxis()
        ax.set_title(f"{wl}, {mode}")
        ax.set_xlabel("average JCT (h)")
    fig.suptitle("Peer arena (grey: the peer's own policy)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


# ----- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulator", required=True, help="the Pollux simulator folder (your checkout)")
    ap.add_argument("--workload", action="append", required=True, help="workload CSV (repeatable)")
    ap.add_argument("--mode", action="append", choices=list(MODES), help="mode (repeatable; default: all)")
    ap.add_argument("--policy", action="append", help="policy (repeatable; default: the plan of each mode)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "PEER.json"), help="JSON results")
    ap.add_argument("--report", help="Markdown report (default: PEER.md beside --out)")
    ap.add_argument("--peer-python", help="python of an environment that runs the simulator")
    ap.add_argument("--env", default=str(ROOT / ".peer-venv"), help="where to make that environment")
    ap.add_argument("--cache", default=str(ROOT / ".peer-cache"), help="cache of finished runs")
    ap.add_argument("--interval", type=int, default=60, help="scheduling interval (s)")
    ap.add_argument("--lookahead", type=int, default=8, help="our policies' look-ahead (slots)")
    ap.add_argument("--no-replay", action="store_true", help="skip the replays in our simulator")
    ap.add_argument("--information", choices=("parity", *INFORMATION), default="parity",
                    help="what our policies are told of job lengths: each peer's own (parity, the "
                         "default: fixed and adaptive none, tuned oracle), or one level for every mode")
    ap.add_argument("--estimate-error", type=float, default=0.0, metavar="SIGMA",
                    help="--information estimate: users' estimates are the truth times exp(SIGMA N(0,1))")
    ap.add_argument("--seed", type=int, default=0, help="the estimates' seed")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs at once (default 1: decision times are measured on a quiet machine)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    report = Path(args.report) if args.report else out.with_suffix(".md")
    try:
        sim = Path(args.simulator)
        check_simulator(sim)
        workloads = [Path(w) for w in args.workload]
        if not (args.estimate_error >= 0 and args.estimate_error < float("inf")) or args.seed < 0:
            raise BadInput(f"--estimate-error must be a finite number >= 0 and --seed >= 0, got "
                           f"{args.estimate_error} and {args.seed}")
        if args.interval < 1 or args.lookahead < 1:
            raise BadInput(f"--interval and --lookahead must be >= 1, got {args.interval} and {args.lookahead}")
        stems = [w.stem for w in workloads]
        if len(set(stems)) < len(stems):
            raise BadInput(f"two workloads share the name {next(x for x in stems if stems.count(x) > 1)!r} "
                           "(reports and the cache tell workloads apart by file name)")
        contents = {w: check_workload(w, sim) for w in workloads}
        pairs = plan(args)
        for p in (out, report):
            if p.is_dir():
                raise BadInput(f"{p}: is a folder, not a file")
            if p.parent.exists() and not p.parent.is_dir():
                raise BadInput(f"{p.parent}: is not a folder")
        py = peer_python(args.peer_python, Path(args.env))
    except BadInput as exc:
        print(f"peer_pollux: error: {exc}", file=sys.stderr)
        return 2
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    code_v, sim_v, run_v = code_version(), simulator_version(sim), runner_version()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    from tqdm import tqdm
    # ours first, the peers' last: a peer run is the same whatever our code, so it is the
    # one most often found in the cache (by then, if another invocation is making it)
    tasks = sorted(((w, m, p) for w in workloads for m, p in pairs), key=lambda t: t[2] in PEER_POLICIES)
    bar = tqdm(total=len(tasks), desc="peer arena", unit="run", file=sys.stderr)

    def one(task: tuple[Path, str, str]) -> tuple[dict[str, Any], bool, dict[str, Any] | None]:
        w, mode, policy = task
        wv = hashlib.sha256(contents[w]).hexdigest()
        who = "peer:" + run_v if policy in PEER_POLICIES else code_v
        told = ("peer",) if policy in PEER_POLICIES else (information(args, mode), str(args.estimate_error), str(args.seed))
        key = cache_key("run", wv, mode, policy, who, sim_v, str(args.interval), str(args.lookahead), *told)
        r, hit = cached(cache, key, lambda tmp: run_in_peer(py, sim, w, mode, policy, tmp, args))
        r["workload"] = w.stem
        rr = None
        if not args.no_replay and mode in REPLAY_MODES and policy not in PEER_POLICIES:
            key = cache_key("replay", wv, mode, policy, code_v, sim_v, str(args.interval), str(args.lookahead), *told)
            rr, _ = cached(cache, key, lambda tmp: replay(w, sim, mode, policy, args))
            rr["workload"] = w.stem
        bar.update(1)
        bar.set_postfix_str(f"{w.stem} {mode} {policy} done")
        return r, hit, rr

    from concurrent.futures import ThreadPoolExecutor
    from placement.executors import math_threads
    try:  # each run's process gets its share of the cores for BLAS/OpenMP (unless set)
        with math_threads(max(1, (os.cpu_count() or 1) // max(1, args.jobs))), \
                ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(one, tasks))
    except RuntimeError as exc:
        bar.close()
        print(f"peer_pollux: error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    order = {t: i for i, t in enumerate((w.stem, m, p) for w in workloads for m, p in pairs)}
    results.sort(key=lambda x: order[(x[0]["workload"], x[0]["mode"], x[0]["policy"])])
    runs = [r for r, _, _ in results]
    replays = [rr for _, _, rr in results if rr is not None]
    hits = sum(hit for _, hit, _ in results)
    ran = len(results) - hits
    doc = {"command": "python " + shlex.join([os.path.relpath(__file__, ROOT), *(argv if argv is not None else sys.argv[1:])]),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": {"cpu": cpu_model(), "nproc": len(os.sched_getaffinity(0)), "python": platform.python_version()},
           "load_before": load_before, "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
           "code_version": code_v, "simulator_version": sim_v, "interval": args.interval,
           "ran": ran, "cached": hits, "runs": runs, "replays": replays, "targets": targets(runs)}
    picture = report.parent / "peer" / f"{report.stem}.png"   # one per report: reports share the folder
    if plot(doc, picture):
        doc["plot"] = os.path.relpath(picture, report.parent)
    write_outputs(doc, out, report, markdown)
    for t in doc["targets"]:
        ratio = "unfinished jobs" if t["ratio"] is None else f"{t['ratio']:.3f}"
        print(f"{t['workload']} {t['mode']}: {t['ours']} / {t['peer']} = {ratio} "
              f"({'within' if t['met'] else 'OUTSIDE'} +-15%)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
