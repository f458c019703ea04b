"""Sia arena: the Sia paper's simulator and its own policies, run by our harness.

    python benchmarks/peer_sia.py --simulator DIR --workload DIR/workloads/philly/workload-1.csv

runs every (workload, policy) inside the peer's simulator, unchanged (the runner
``placement.integrations.sia`` plays each through the simulator's own driver with the
flags of its ``run_experiment.sh``), and writes ``--out`` (JSON: ``{"runs": [...]}``) and a
Markdown report beside it (``--report``, default ``benchmarks/PEER_SIA.md``) whose
"Fidelity" table sets each figure next to the paper's Table 3. First step of the arena:
the peers must reproduce their paper before our policies are measured there.

- DIR is the user's checkout of the simulator (github.com/siasosp23/artifacts, folder
  ``sia-simulator/``). Nothing of it is copied into the project or written into it.
- The simulator needs ``numpy==1.23.5 pandas==1.5.3 cvxpy==1.4.4 cylp`` (CBC) and more
  (``placement.integrations.sia.SIA_PACKAGES``), which cannot live beside this project's
  OR-Tools. So the runs happen in an environment of their own: ``--peer-python PY`` names
  its interpreter; without it the script uses ``.sia-venv/`` in the project and makes it on
  first use (about 30 s from wheels). The project reaches it by ``PYTHONPATH``.
- Policies: ``--policy peer:sia|peer:gavel|peer:pollux`` (repeatable; default all three) and
  ours (``lp-rounding``, ``greedy``, ... any name of ``placement.online.registry``), put into
  the simulator as its Sia policy (``placement.integrations.sia_adapter``: jobs behave as
  under ``peer:sia``) and told ``--information`` of job lengths (default ``none``: Sia's own;
  ``oracle`` is labelled so in the report). Every run shows what its policy knew.
  Finished runs are cached in ``--cache`` (default ``.peer-cache/``) by the workload's
  content, the policy, ``--max-hours``, the simulator's files and the runner's code: a
  rerun only runs what changed. ``--jobs N`` runs N at once (default 1, for decision times
  measured on a quiet machine). ``--cached-only`` runs nothing: it reports what is cached
  and lists the rest, with the progress of a run still going (its log beside the cache).
- Several workloads of one trace (the folder name says which: ``philly/``, ``saturn/``)
  add an "all N workloads" row to the fidelity table, summarized as the paper does.
- Bad input (a missing or wrong DIR, an unreadable or bad workload, an unknown policy, an
  environment that cannot be made) is one line on stderr, exit 2, and nothing written.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
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
from peer_pollux import BadInput, cache_key, cached, code_hash, code_version, write_outputs  # noqa: E402

from placement.integrations.sia import (CONFIG_OVERRIDES, PEER_POLICIES, SIA_PACKAGES, SiaError,  # noqa: E402
                                        check_folder, simulator_hash)
from placement.online.registry import POLICIES as OURS  # noqa: E402

#: the paper's Table 3 (SOSP'23, 64-GPU heterogeneous cluster): trace -> policy -> (average
#: JCT h, its +-, p99 JCT h, makespan h, its +-), each +- over the trace's ten workloads
#: (for the average, the standard deviation of the per-workload averages, as the artifact's
#: utils/print_run_stats.py prints it).
PAPER = {"philly": {"peer:sia": (0.6, 0.1, 9.5, 14.2, 1.9), "peer:pollux": (1.0, 0.1, 14.9, 24.5, 7.9),
                    "peer:gavel": (1.9, 0.3, 30.0, 33.8, 8.6)},
         "saturn": {"peer:sia": (0.7, 0.1, 10.9, 14.9, 1.7), "peer:pollux": (1.0, 0.2, 15.0, 25.5, 8.0),
                    "peer:gavel": (2.5, 0.9, 38.7, 43.0, 10.9)}}
TRACE_NAMES = {"philly": "Philly", "saturn": "Helios (saturn)"}
ENV_EXTRA = ["networkx", "tqdm", "highspy", "pulp"]  # what `import placement` needs


# ----- inputs ------------------------------------------------------------------------------------
def trace_of(path: Path) -> str | None:
    """The trace a workload was drawn from, by its folder (``workloads/philly/...``)."""
    return next((t for t in PAPER if t in path.resolve().parts), None)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


def _last_line(text: str, code: int) -> str:
    """The last thing written (a progress bar's last state, or an error) without its prefix."""
    lines = [x.strip() for x in re.split(r"[\r\n]+", text or "") if x.strip()]
    return lines[-1].removeprefix("placement: error: ") if lines else f"exit {code}"


def check_workload(py: Path, sim: Path, path: Path) -> bytes:
    """The workload's bytes, after the runner's own check of every row in the peer's
    environment (``--check``): a bad row stops the benchmark before anything runs."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{path}: no such workload file") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the workload: {exc}") from None
    p = subprocess.run([str(py), "-m", "placement.integrations.sia", "--simulator", str(sim),
                        "--workload", str(path), "--check"], capture_output=True, text=True, env=_env())
    if p.returncode != 0:
        raise BadInput(_last_line(p.stderr, p.returncode))
    return data


# ----- the simulator's environment ---------------------------------------------------------------
def _probe(python: Path) -> str | None:
    """None if ``python`` can run the simulator and the runner, else what is missing."""
    code = ("import numpy, pandas, scipy, cvxpy, pymoo, rich, placement.integrations.sia; "
            "assert 'CBC' in cvxpy.installed_solvers(), 'cvxpy has no CBC (pip install cylp==0.93.0)'")
    try:
        p = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, env=_env())
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if p.returncode == 0 else _last_line(p.stderr, p.returncode)


def peer_python(given: str | None, env_dir: Path) -> Path:
    """The interpreter of the simulator's environment: given, found, or made."""
    install = f"pip install {SIA_PACKAGES} {' '.join(ENV_EXTRA)}"
    if given:
        py = Path(given)
        why = _probe(py)
        if why:
            raise BadInput(f"--peer-python {py}: cannot run the Sia simulator ({why}); in that environment: {install}")
        return py
    py = env_dir / "bin" / "python"
    if py.exists() and _probe(py) is None:
        return py
    print(f"peer_sia: making the simulator's environment in {env_dir} (once, about a minute) ...", file=sys.stderr)
    steps = [[sys.executable, "-m", "venv", str(env_dir)],
             [str(py), "-m", "pip", "install", "--quiet", *shlex.split(SIA_PACKAGES), *ENV_EXTRA]]
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise BadInput(f"cannot make {env_dir} ({shlex.join(cmd[2:5])}...: {_last_line(p.stderr, p.returncode)}); "
                           f"make it by hand ({install}) and pass --peer-python")
    why = _probe(py)
    if why:
        raise BadInput(f"{env_dir}: made, but it cannot run the Sia simulator: {why}")
    return py


def runner_version() -> str:
    """The runner's code, part of every run's key."""
    return code_hash([ROOT / "placement" / "integrations" / "sia.py"])



# ----- runs --------------------------------------------------------------------------------------
def run_in_peer(py: Path, sim: Path, workload: Path, policy: str, out: Path, max_hours: float,
                log: Path, information: str = "none") -> dict[str, Any]:
    """One run in the peer's environment; its progress bar goes to the terminal, or to
    ``log`` (beside the cache entry, for ``tail`` while it runs; removed once it is done)."""
    cmd = [str(py), "-m", "placement.integrations.sia", "--simulator", str(sim), "--workload", str(workload),
           "--policy", policy, "--out", str(out), "--max-hours", str(max_hours), "--progress",
           *([] if policy in PEER_POLICIES else ["--information", information])]
    tty = sys.stderr.isatty()
    with open(os.devnull if tty else log, "w") as err:
        p = subprocess.run(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=None if tty else err)
    if p.returncode != 0:
        tail = "" if tty else _last_line(log.read_text(errors="replace"), p.returncode)
        raise RuntimeError(f"{workload.stem} {policy}: the run failed (exit {p.returncode}) {tail}")
    log.unlink(missing_ok=True)
    return json.loads(out.read_text())


def _against(paper: tuple[float, ...], label: str, trace: str, policy: str, avg_h: float | None,
             p99_h: float | None, makespan_h: float | None, complete: bool, spread_h: float | None = None
             ) -> dict[str, Any]:
    avg, spread, p99, makespan, makespan_spread = paper

    def within(ours: float | None, theirs: float, pm: float) -> bool | None:
        return None if ours is None or not complete else abs(round(ours, 1) - theirs) <= pm + 1e-9
    return {"workload": label, "trace": trace, "policy": policy, "ours_h": avg_h, "ours_spread_h": spread_h,
            "paper_h": avg, "paper_spread_h": spread, "within": within(avg_h, avg, spread),
            "ours_p99_h": p99_h, "paper_p99_h": p99, "ours_makespan_h": makespan_h, "paper_makespan_h": makespan,
            "paper_makespan_spread_h": makespan_spread, "makespan_within": within(makespan_h, makespan, makespan_spread)}


def fidelity(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run set against the paper's figure for its trace and policy; where several
    workloads of one trace ran, also their summary as the paper (and the artifact's
    ``utils/print_run_stats.py``) makes it: the mean JCT over all their jobs, the standard
    deviation of the per-workload averages, the p99 of all their JCTs, the mean makespan."""
    out: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        paper = PAPER.get(r.get("trace") or "", {}).get(r["policy"])
        if paper is None:
            continue
        groups.setdefault((r["trace"], r["policy"]), []).append(r)
        out.append(_against(paper, r["workload"], r["trace"], r["policy"], r["average_jct_h"],
                            None if r["p99_jct"] is None else r["p99_jct"] / 3600,
                            None if r["makespan"] is None else r["makespan"] / 3600, not r["unfinished"]))
    for (trace, policy), rs in groups.items():
        if len(rs) < 2:
            continue
        complete = all(not r["unfinished"] for r in rs)
        jcts = sorted(j for r in rs for j in r["jcts"].values())
        avgs = [r["average_jct"] for r in rs]
        mean = sum(avgs) / len(avgs)
        out.append(_against(PAPER[trace][policy], f"all {len(rs)} workloads", trace, policy,
                            sum(jcts) / len(jcts) / 3600, jcts[int(0.99 * len(jcts))] / 3600,
                            sum(r["makespan"] or 0 for r in rs) / len(rs) / 3600, complete,
                            (sum((a - mean) ** 2 for a in avgs) / len(avgs)) ** 0.5 / 3600))
    return out


# ----- report ------------------------------------------------------------------------------------
def _h(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x / 3600:.{digits}f}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def markdown(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    L = ["# Sia arena: the Sia paper's simulator, run by our harness", "",
         f"Command: `{doc['command']}`  ", f"Date: {doc['date']}; machine: {doc['machine']['cpu']}, "
         f"{doc['machine']['nproc']} cores, Python {doc['machine']['python']}; load average "
         f"{doc['load_before']} before, {doc['load_after']} after; runner {doc['runner_version']}, "
         f"simulator files {doc['simulator_version']}; {doc['ran']} runs made now, {doc['cached']} from the cache"
         + (" (their decision and wall times are those measured when each run was made, under the load "
            "of that time)" if doc["cached"] else "") + ".", "",
         "Every run plays the workload in the peer's simulator, unchanged (64 GPUs: 6 x 4 T4, 3 x 8 "
         "RTX 2080Ti, 2 x 8 A100), through its own driver (`multi_simulator.py`, or "
         "`multi_simulator_unaware.py` for Pollux) with the flags of its `run_experiment.sh`; the "
         "runner (`placement.integrations.sia`) only sets "
         + ", ".join(f"`{k} = {v}`" for k, v in CONFIG_OVERRIDES.items())
         + " on the imported `simulator_config` and times each `policy.optimize` call. JCT, p99 (the "
         "sorted JCTs at index int(0.99 n)) and makespan (last completion minus first submission) "
         "are computed as the artifact's `utils/print_run_stats.py` does; restarts are the "
         "simulator's checkpoint-restores summed over jobs.", ""]
    env = next((r.get("environment") for r in runs if r.get("environment")), None)
    if env:
        L += ["Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()) + ".", ""]
    for wl in dict.fromkeys((r["trace"], r["workload"]) for r in runs):
        rs = sorted((r for r in runs if (r["trace"], r["workload"]) == wl),
                    key=lambda r: (r["average_jct"] is None, r["average_jct"] or 0))
        L += [f"## {TRACE_NAMES.get(wl[0] or '', wl[0] or 'workload')}: {wl[1]}", "",
              "| policy | jobs as under | knows of job lengths | avg JCT (h) | x peer:sia | p99 JCT (h) | "
              "makespan (h) | unfinished | restarts | decision median (ms) | p95 (ms) | decisions | wall (s) |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        sia = next((r["average_jct"] for r in rs if r["policy"] == "peer:sia" and not r["unfinished"]), None)
        for r in rs:
            ratio = "-" if not sia or r["average_jct"] is None or r["unfinished"] else f"{r['average_jct'] / sia:.2f}"
            knows = r.get("information", "none")
            knows = "**oracle** (true lengths)" if knows == "oracle" else knows
            like = r.get("jobs_like", r["policy"])
            L.append(f"| `{r['policy']}` | `{like}` | {knows} | {_h(r['average_jct'])} | {ratio} | {_h(r['p99_jct'], 1)} | "
                     f"{_h(r['makespan'], 1)} | "
                     f"{len(r['unfinished'])} | {r['restarts']} | {_ms(r['decision_median_s'])} | "
                     f"{_ms(r['decision_p95_s'])} | {r['decisions']} | {r['wall_s']:.0f} |")
        L.append("")
    fd = doc["fidelity"]
    if fd:
        L += ["## Fidelity: our harness's figure next to the paper's Table 3", "",
              "The paper's figures summarize the ten workloads of each trace (its +- is the spread "
              "of the per-workload averages; p99 pools their jobs). A `workload-N` row is ONE "
              "workload (the artifact's checkout ships `workload-1` of each trace); an `all N "
              "workloads` row summarizes those that ran as the paper does (mean JCT over all their "
              "jobs +- the standard deviation of their averages, p99 of all their JCTs, mean "
              "makespan). \"Within\" compares our figure, rounded to the paper's 0.1 h, with the "
              "paper's figure +- its spread (the paper gives none for p99).", "",
              "| trace | workload | policy | ours: avg JCT (h) | paper: avg JCT (h) | within the paper's +- | "
              "ours: p99 (h) | paper: p99 (h) | ours: makespan (h) | paper: makespan (h) | within |",
              "|---|---|---|---:|---:|---|---:|---:|---:|---:|---|"]
        for f in fd:
            yes = lambda w: "unfinished jobs" if w is None else ("yes" if w else "**no**")  # noqa: E731
            within = yes(f["within"])
            fmt = lambda x, d=2: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
            ours = fmt(f["ours_h"]) + ("" if f.get("ours_spread_h") is None else f" +- {f['ours_spread_h']:.2f}")
            L.append(f"| {TRACE_NAMES[f['trace']]} | {f['workload']} | `{f['policy']}` | {ours} | "
                     f"{f['paper_h']:.1f} +- {f['paper_spread_h']:.1f} | {within} | {fmt(f['ours_p99_h'], 1)} | "
                     f"{f['paper_p99_h']:.1f} | {fmt(f['ours_makespan_h'], 1)} | {f['paper_makespan_h']:.1f} +- "
                     f"{f['paper_makespan_spread_h']:.1f} | {yes(f['makespan_within'])} |")
        L.append("")
    if doc.get("missing"):
        L += ["## Not finished when this report was written", "",
              "| trace | workload | policy | how far (its progress bar, if still running) |", "|---|---|---|---|"]
        for m in doc["missing"]:
            L.append(f"| {TRACE_NAMES.get(m['trace'] or '', '-')} | {m['workload']} | `{m['policy']}` | "
                     f"{(m['progress'] or 'not started').replace('|', '/')} |")
        L.append("")
    L += ["## Reading the fidelity table (docs/sia_arena.md)", "",
          "- One workload against ten: the paper's +- is the standard deviation of ten workloads' "
          "averages, so a single workload inside it is what a typical workload does, and one outside "
          "it may be an unusual workload rather than a wrong simulator; p99 and makespan vary more.",
          "- Solver: the paper names GLPK (section 3.4); the artifact's `sia.py` solves Sia's MIP with "
          "CBC (the GLPK call commented out, `simulator_config.sia_solver` read nowhere) at a 0.01 % "
          "gap, with 8 threads; we run CBC with 1 thread (2 cores here), which may pick another "
          "allocation within the gap.",
          "- `peer:pollux` is random: its genetic algorithm (`pollux_unaware.py`, 100 x 100 each round) "
          "draws from NumPy's unseeded global state, so two runs differ.",
          "- Decision and wall times were measured with two runs at once on 2 cores (and whatever else "
          "the machine was doing: see the load averages), so they are upper bounds of a quiet machine's.",
          ""]
    return "\n".join(L)


# ----- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulator", required=True, help="the sia-simulator folder (your checkout)")
    ap.add_argument("--workload", action="append", required=True, help="workload CSV (repeatable)")
    ap.add_argument("--policy", action="append",
                    help="peer:sia, peer:gavel, peer:pollux or one of ours, e.g. lp-rounding (repeatable; "
                         "default: the three peers)")
    ap.add_argument("--information", choices=("none", "oracle"), default="none",
                    help="what our policies are told of job lengths (default none, as Sia; the peers always none)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "PEER_SIA.json"), help="JSON results")
    ap.add_argument("--report", help="Markdown report (default: .md beside --out)")
    ap.add_argument("--peer-python", help="python of an environment that runs the Sia simulator")
    ap.add_argument("--env", default=str(ROOT / ".sia-venv"), help="where to make that environment")
    ap.add_argument("--cache", default=str(ROOT / ".peer-cache"), help="cache of finished runs")
    ap.add_argument("--max-hours", type=float, default=24 * 30, help="stop a run after this much simulated time")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    ap.add_argument("--cached-only", action="store_true",
                    help="run nothing: report the runs found in the cache, and list the others "
                         "(with how far a run still going has got, from its log)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    report = Path(args.report) if args.report else out.with_suffix(".md")
    try:
        sim = Path(args.simulator)
        try:
            check_folder(sim)
        except SiaError as exc:
            raise BadInput(str(exc)) from None
        policies = list(dict.fromkeys(args.policy or PEER_POLICIES))
        bad = [p for p in policies if p not in PEER_POLICIES and p not in OURS]
        if bad:
            raise BadInput(f"unknown policy {bad[0]!r}; choose from {', '.join([*PEER_POLICIES, *OURS])}")
        if not 0 < args.max_hours < float("inf") or args.jobs < 1:
            raise BadInput(f"--max-hours must be > 0 and --jobs >= 1, got {args.max_hours} and {args.jobs}")
        workloads = [Path(w) for w in args.workload]
        names = [(trace_of(w), w.stem) for w in workloads]
        if len(set(names)) < len(names):
            raise BadInput(f"two workloads share the name {next(x for x in names if names.count(x) > 1)[1]!r} "
                           "in the same trace (the report tells them apart by trace and file name)")
        for p in (out, report):
            if p.is_dir():
                raise BadInput(f"{p}: is a folder, not a file")
            if p.parent.exists() and not p.parent.is_dir():
                raise BadInput(f"{p.parent}: is not a folder")
        py = peer_python(args.peer_python, Path(args.env))
        contents = {w: check_workload(py, sim, w) for w in workloads}
    except BadInput as exc:
        print(f"peer_sia: error: {exc}", file=sys.stderr)
        return 2
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    sim_v, run_v = simulator_hash(sim), runner_version()
    ours_v = code_version() if any(p in OURS for p in policies) else None
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    from tqdm import tqdm
    tasks = [(w, p) for w in workloads for p in policies]
    bar = tqdm(total=len(tasks), desc="sia arena", unit="run", file=sys.stderr)

    def one(task: tuple[Path, str]) -> tuple[dict[str, Any], bool]:
        w, policy = task
        mine = policy in OURS
        key = cache_key("sia-run", hashlib.sha256(contents[w]).hexdigest(), policy, run_v, sim_v,
                        str(args.max_hours), *((ours_v, args.information) if mine else ()))
        if args.cached_only and not (cache / f"{key}.json").exists():
            log = cache / f"{key}.log"
            got = _last_line(log.read_text(errors="replace"), 0) if log.exists() else ""
            bar.update(1)
            return {"workload": w.stem, "trace": trace_of(w), "policy": policy, "progress": got or None}, False
        r, hit = cached(cache, key, lambda tmp: run_in_peer(py, sim, w, policy, tmp, args.max_hours,
                                                           cache / f"{key}.log", args.information))
        r["workload"], r["trace"] = w.stem, trace_of(w)
        bar.update(1)
        bar.set_postfix_str(f"{w.stem} {policy} done")
        return r, hit

    from concurrent.futures import ThreadPoolExecutor
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(one, tasks))
    except RuntimeError as exc:
        bar.close()
        print(f"peer_sia: error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    runs = [r for r, _ in results if "average_jct" in r]
    missing = [r for r, _ in results if "average_jct" not in r]
    hits = sum(hit for _, hit in results)
    doc = {"command": "python " + shlex.join([os.path.relpath(__file__, ROOT), *(argv if argv is not None else sys.argv[1:])]),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": {"cpu": cpu_model(), "nproc": len(os.sched_getaffinity(0)), "python": platform.python_version()},
           "load_before": load_before, "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
           "runner_version": run_v, "simulator_version": sim_v, "ran": len(runs) - hits, "cached": hits,
           "runs": runs, "missing": missing, "fidelity": fidelity(runs)}
    write_outputs(doc, out, report, markdown)
    for f in doc["fidelity"]:
        verdict = "unfinished jobs" if f["within"] is None else ("within" if f["within"] else "OUTSIDE")
        ours = "-" if f["ours_h"] is None else f"{f['ours_h']:.2f}"
        print(f"{f['trace']} {f['workload']} {f['policy']}: {ours} h vs paper {f['paper_h']} +- "
              f"{f['paper_spread_h']} h ({verdict})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
