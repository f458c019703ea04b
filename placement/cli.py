"""The ``placement`` command: parses arguments and calls the library, nothing more.

Exit codes: 0 success (valid), 1 invalid schedule or no schedule (the reason on stderr),
2 bad input (one line on stderr, naming the file, the JSON path and the reason; never a
traceback), 130 interrupted (Ctrl-C; 143 for SIGTERM): nothing half-written.

Outputs are checked before any work and written all or nothing (:mod:`placement.outputs`);
``solve --time-limit`` bounds the whole command (:mod:`placement.deadline`).
"""
from __future__ import annotations

import sys

try:    # Ctrl-C while the command starts up: the same one line as later, no traceback
    import argparse
    import json
    import os
    from collections.abc import Callable, Sequence
    from dataclasses import replace
    from pathlib import Path

    from placement import __version__, deadline
    from placement.model import limits
    from placement.cli_managers import add_import_topology, add_serve
    from placement.cli_simulate import (ExecutorUnavailable, add_simulate_arguments, bound_lines, partitions_on,
                                        simulation_input)
    from placement.model.evaluate import evaluate
    from placement.outputs import OutputError, Staged, check_folder, check_outputs, json_text, write_text
    from placement.model.strict_json import FileFormatError
    from placement.model.instance import Instance
    from placement.model.schedule import Schedule
except KeyboardInterrupt:
    exec("None")   # the exit code below holds (deadline.interrupted says why)
    sys.stderr.write("placement: interrupted\n")
    raise SystemExit(130) from None

EXIT_OK, EXIT_INVALID, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """Raised by a command for input it cannot use; printed as one line, exit code 2."""


def _check_outputs(outputs: dict, inputs: Sequence[str] = ()) -> None:
    try:
        check_outputs(outputs, inputs)
    except OutputError as exc:
        raise BadInput(str(exc)) from None


def _load(kind: type, path: str):
    try:
        return kind.load(path)
    except FileFormatError as exc:
        prefix = "" if exc.path == str(path) else f"{path}: "
        raise BadInput(f"{prefix}{exc}") from None


def cmd_validate(args: argparse.Namespace) -> int:
    instance = _load(Instance, args.instance)
    schedule = _load(Schedule, args.schedule)
    violations, report = evaluate(instance, schedule)
    if args.json:
        print(json.dumps({"valid": not violations,
                          "violations": [v.to_dict() for v in violations],
                          "report": report.to_dict()}, indent=1))
    elif violations:
        print(f"INVALID: {len(violations)} violation(s)")
        for v in violations[: args.max_violations]:
            print(f"  {v}")
        if len(violations) > args.max_violations:
            print(f"  ... {len(violations) - args.max_violations} more (--max-violations, --json)")
    else:
        print("VALID")
        print(report.summary())
    if schedule.instance is not None and schedule.instance != instance.name:
        print(f"note: the schedule names instance {schedule.instance!r}, the instance file is "
              f"{instance.name!r}", file=sys.stderr)
    return EXIT_INVALID if violations else EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    inst = _load(Instance, args.instance)
    topo = inst.topology
    totals = {r: sum(m.capacity.get(r, 0) for m in topo.machines) for r in inst.resources}
    work = sum(j.work_batches * j.batch_seconds for j in inst.jobs)
    lines = [
        f"instance   {inst.name}",
        f"horizon    {inst.horizon} slots x {inst.slot_seconds:g} s = {inst.horizon * inst.slot_seconds:g} s",
        f"machines   {len(topo.machines)} (capacity: "
        + ", ".join(f"{r} {v:g}" for r, v in totals.items()) + ")",
        f"switches   {len(topo.switches)}, links {len(topo.links)}, root {topo.root_id}, "
        f"depth {max(topo.depth(m.id) for m in topo.machines)}",
        f"jobs       {len(inst.jobs)} (arrivals in slots "
        f"{min((j.arrival for j in inst.jobs), default=0)}..{max((j.arrival for j in inst.jobs), default=0)}, "
        f"workers {sum(j.min_workers for j in inst.jobs)}..{sum(j.max_workers for j in inst.jobs)} "
        f"in all, {work:g} worker-seconds of compute)",
    ]
    if args.jobs:
        lines.append("")
        lines.append(f"{'job':<12} {'arrival':>7} {'batches':>10} {'s/batch':>8} {'workers':>9} "
                     f"{'kappa':>6} {'weight':>6}")
        for j in inst.jobs:
            lines.append(f"{j.id:<12} {j.arrival:>7} {j.work_batches:>10g} {j.batch_seconds:>8g} "
                         f"{f'{j.min_workers}..{j.max_workers}':>9} {j.kappa:>6.3g} {j.weight:>6g}")
    print("\n".join(lines))
    return EXIT_OK


def cmd_solve(args: argparse.Namespace) -> int:
    from placement.offline.solve import SolveError, solve
    from solvers.result import Status

    csv_target = Path(args.out).with_suffix(".csv") if args.out and args.csv else None
    _check_outputs({"--out": args.out, "--csv": csv_target, "--plot": args.plot}, [args.instance])
    fmt = _plot_format(args.plot) if args.plot else None
    instance = _load(Instance, args.instance)
    try:
        deadline.check("loading the instance")
        solution = solve(instance, solver=args.solver, seed=args.seed, time_limit=args.time_limit,
                         trials=args.trials, model=args.model)
    except SolveError as exc:
        raise BadInput(str(exc)) from None
    except deadline.TimeLimitReached as stop:
        print(f"placement: no schedule: {stop}", file=sys.stderr)
        return EXIT_INVALID
    cert = solution.certificate
    if solution.schedule is None:
        if cert.status is Status.BOUND:
            print(cert.summary(args.verbose))
            return EXIT_OK
        print(cert.summary(args.verbose), file=sys.stderr)
        reason = cert.message or "the solver gave none"
        if not reason.startswith("no schedule"):
            reason = f"no schedule ({cert.status.value}): {reason}"
        print(f"placement: {reason}", file=sys.stderr)
        return EXIT_INVALID
    schedule = solution.schedule
    with args.guard.writing(), Staged() as staged:    # all or nothing, never cut by the guard
        if args.out:
            staged.write_text(args.out, json_text(schedule.to_dict()))
        if csv_target:
            staged.write_text(csv_target, schedule.to_csv())
        if args.plot:
            from placement.plot import PlotUnavailable, write_plot
            try:
                write_plot(instance, schedule, staged.path(args.plot), fmt)
            except PlotUnavailable as exc:
                raise BadInput(str(exc)) from None
            except OSError as exc:     # a full disk: the figure is half-drawn, nothing is renamed
                raise BadInput(f"--plot {args.plot}: cannot write: {exc.strerror or exc}") from None
        staged.commit()
    if args.csv and not args.out:
        print(schedule.to_csv(), end="")
        return EXIT_OK
    print(schedule.table([j.id for j in instance.jobs], instance.horizon, legend=True))
    print()
    print(replace(solution.report, bound=None, gap=None).summary())   # the bound and gap: once, below
    print(cert.summary(args.verbose))
    for path in (args.out, csv_target, args.plot):
        if path:
            print(f"wrote {path}")
    if cert.message.startswith("time limit"):
        print(f"placement: {cert.message}", file=sys.stderr)
    return EXIT_OK


def _plot_format(path: str) -> str:
    from placement.plot import PlotUnavailable, plot_format
    try:
        return plot_format(path)
    except (ValueError, PlotUnavailable) as exc:
        raise BadInput(f"--plot {exc}") from None


def cmd_generate(args: argparse.Namespace) -> int:
    from placement.traces.generate import generate

    _check_outputs({"--out": args.out})
    try:
        instance = generate(jobs=args.jobs, cluster=args.cluster, horizon=args.horizon,
                            slot_seconds=args.slot_seconds, seed=args.seed, load=args.load, name=args.name)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if args.out:
        write_text(args.out, json_text(instance.to_dict()))
        print(f"wrote {args.out}: {len(instance.jobs)} jobs, {len(instance.topology.machines)} machines, "
              f"horizon {instance.horizon}")
    else:
        print(json.dumps(instance.to_dict(), indent=1))
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from placement.model.cluster_spec import parse_cluster
    from placement.online.registry import POLICIES, make_policy
    from placement.simulate.events import parse_event
    from placement.simulate.loop import simulate
    from placement.simulate.plots import plot_simulation

    names = list(POLICIES) if args.policy == ["all"] else args.policy
    _check_outputs({"--out": args.out}, [args.trace.removeprefix("pollux:")])
    if args.plot:
        check_folder("--plot", args.plot, {"--out": Path(args.out)} if args.out else {})
        _plot_format(Path(args.plot) / "jct_cdf.png")   # matplotlib is there
    try:
        policies = [make_policy(n) for n in names]
        events = [parse_event(e) for e in args.event]
        source, topology, slot_seconds = simulation_input(args)
        if args.cluster:
            topology = parse_cluster(args.cluster)
    except (ValueError, FileNotFoundError) as exc:
        hint = ("; or simulate a shipped sample: --trace instances/traces/philly-30-s3.csv --cluster racks:4x8"
                if args.trace == "philly" and isinstance(exc, FileNotFoundError) else "")
        raise BadInput(f"{exc}{hint}") from None
    if topology is None:
        raise BadInput("a job list needs a cluster: add --cluster (e.g. racks:4x8 or pai:64)")
    results = {}
    try:
        with partitions_on(args, policies):   # --executor dask: the LP policies' partitions run there
            for policy in policies:
                try:
                    result = simulate(source, topology=topology, policy=policy, lookahead=args.lookahead,
                                      mode=args.mode, slot_seconds=slot_seconds, horizon=args.horizon,
                                      progress_noise=args.noise, seed=args.seed, events=events,
                                      information=args.information, estimate_error=args.estimate_error,
                                      progress_bar=args.progress or sys.stderr.isatty())
                except ValueError as exc:
                    raise BadInput(f"{policy.name}: {exc}") from None
                results[policy.name] = result
                print(result.summary())
                print()
    except ExecutorUnavailable as exc:
        raise BadInput(str(exc)) from None
    if len(results) > 1:
        print(f"{'policy':<12} {'avg JCT (s)':>12} {'p95 JCT (s)':>12} {'makespan (s)':>13} "
              f"{'unfinished':>10} {'reconf':>7} {'median decision (s)':>20}")
        for name, r in results.items():
            print(f"{name:<12} {r.average_jct:>12.6g} {r.p95_jct:>12.6g} {r.makespan:>13.6g} "
                  f"{len(r.unfinished):>10} {r.reconfigurations:>7} {r.decision_time['median']:>20.4f}")
    if args.bound:
        print(bound_lines(results))
    with Staged() as staged:     # --out only once the plots are drawn: all or nothing
        if args.out:
            staged.write_text(args.out, json_text({name: r.to_dict(schedule=False) for name, r in results.items()}))
        plots = plot_simulation(results, args.plot) if args.plot else []
        staged.commit()
    for path in ([args.out] if args.out else []) + plots:
        print(f"wrote {path}")
    return EXIT_OK


def cmd_batch(args: argparse.Namespace) -> int:
    from placement.batch.run import BatchError, run_batch

    try:
        summary = run_batch(args.patterns, solver=args.solver, out_csv=args.out, executor=args.executor,
                            address=args.address, workers=args.workers, time_limit=args.time_limit,
                            seed=args.seed, trials=args.trials, progress=not args.no_progress,
                            retry_failed=args.retry_failed, repair_results=args.repair_results)
    except BatchError as exc:
        raise BadInput(str(exc)) from None
    except KeyboardInterrupt:
        print(f"placement: the rows finished so far are in {args.out}; the same command resumes", file=sys.stderr)
        raise
    skipped = f"{summary.skipped} skipped (already in {args.out}"
    skipped += f", {summary.skipped_failed} of them failed: --retry-failed)" if summary.skipped_failed else ")"
    gap = "-" if summary.mean_gap is None else f"{summary.mean_gap:.2%}"
    print(f"instances  {summary.total}: {summary.solved} solved, {summary.failed} failed, {skipped}")
    print(f"mean gap   {gap} (instances solved in this run)")
    where = f"dask at {args.address}" if args.address else f"{args.executor}, {args.workers} worker(s)"
    print(f"wall time  {summary.wall_seconds:.2f} s ({where})")
    for line, reason in summary.repaired:
        print(f"repaired   line {line} of {args.out} dropped ({reason}); its instance solved again")
    if summary.missing_schedules:
        print(f"re-solved  {summary.missing_schedules} instance(s) whose schedule file was missing")
    for path, error in summary.failures[:10]:
        print(f"failed     {path}: {error}", file=sys.stderr)
    if summary.failed > 10:
        print(f"failed     ... {summary.failed - 10} more (see the error column)", file=sys.stderr)
    print(f"wrote {args.out}")
    return EXIT_OK if summary.all_solved else EXIT_INVALID


class _Parser(argparse.ArgumentParser):
    """Argument errors in one line too (``--jobs 1e9``); the usage is one --help away."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"placement: error: {_one_line(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="placement", description=(
        "Place the workers and parameter servers of distributed ML training jobs, slot by slot."))
    parser.add_argument("--version", action="version", version=f"placement {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check a schedule against MODEL.md and score it")
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("schedule", help="schedule JSON file")
    p.add_argument("--json", action="store_true", help="print verdict, violations and report as JSON")
    p.add_argument("--max-violations", type=int, default=20, metavar="N",
                   help="violations to list in text mode (default 20)")
    p.set_defaults(run=cmd_validate)

    p = sub.add_parser("show", help="summarise an instance")
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("--jobs", action="store_true", help="also list every job")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("solve", help="place the jobs: LP relaxation, rounding, repair (or another solver)")
    p.add_argument("instance", help="instance JSON file")
    p.add_argument("--solver", default="rounding", choices=["rounding", "greedy", "exact", "lp-bound"],
                   help="rounding (default), greedy baseline, exact ILP, or only the LP lower bound")
    p.add_argument("--seed", type=int, default=0, help="seed of the rounding trials (default 0)")
    p.add_argument("--time-limit", type=deadline.seconds, default=None, metavar="SECONDS",
                   help="cap on the whole command: load, build, solve, write; at the limit the best "
                        "schedule so far is written, or none (exit 1). exact: 60 s for the ILP by default")
    p.add_argument("--trials", type=int, default=32, help="rounding trials (default 32)")
    p.add_argument("--model", default="auto", choices=["auto", "per-machine", "aggregated", "configuration"],
                   help="LP model: per-machine, aggregated (smaller), configuration (sizes jobs; "
                        "for speed tables), or by size (default)")
    p.add_argument("--out", metavar="FILE", help="write the schedule JSON here")
    p.add_argument("--csv", action="store_true",
                   help="also write t,job,machine,workers,ps CSV (beside --out, else to stdout)")
    p.add_argument("--plot", metavar="PNG", help="draw per-machine allocations and utilisation "
                   "(workers solid, PSs hatched); the suffix picks the format: .png, .svg, .pdf, ...")
    p.add_argument("--verbose", action="store_true", help="the rounding guarantee in full")
    p.set_defaults(run=cmd_solve)

    p = sub.add_parser("generate", help="write a random instance built from measured model profiles")
    p.add_argument("--jobs", type=int, required=True, help="number of jobs")
    p.add_argument("--cluster", default="racks:2x4", help="star:N, racks:RxM, pai:N or an instance file (its topology; default racks:2x4)")
    p.add_argument("--horizon", type=int, default=None, help="slots (default: long enough to finish)")
    p.add_argument("--slot-seconds", type=float, default=300, help="slot length (default 300)")
    p.add_argument("--load", type=float, default=1.0, help="arrival intensity (default 1.0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default=None)
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(run=cmd_generate)

    p = sub.add_parser("simulate", help="run online policies through a job stream, slot by slot")
    add_simulate_arguments(p)
    p.set_defaults(run=cmd_simulate)

    p = sub.add_parser("batch", help="solve many instance files into one CSV, locally or on a Dask cluster")
    p.add_argument("patterns", nargs="+", metavar="GLOB", help="instance files or globs (quote them for **)")
    p.add_argument("--solver", required=True, choices=["rounding", "greedy", "exact", "lp-bound"])
    p.add_argument("--executor", default="local", choices=["local", "dask"],
                   help="local processes (default) or a Dask cluster (pip install \"placement[dask]\")")
    p.add_argument("--address", default=None, metavar="tcp://HOST:8786",
                   help="dask: a running scheduler (default: start a local cluster of --workers)")
    p.add_argument("--workers", type=int, default=1, help="processes (default 1: in this process)")
    p.add_argument("--time-limit", type=deadline.seconds, default=None, metavar="SECONDS", help="cap on each solve")
    p.add_argument("--seed", type=int, default=0, help="seed of the rounding trials (default 0)")
    p.add_argument("--trials", type=int, default=32, help="rounding trials (default 32)")
    p.add_argument("--out", required=True, metavar="CSV", help="results, one row per instance; "
                   "schedules go to schedules/ beside it; an existing file is resumed")
    p.add_argument("--retry-failed", action="store_true", help="solve again the instances whose row has an error")
    p.add_argument("--repair-results", action="store_true", help="drop the rows of --out that are not batch "
                   "rows (reported by line) and solve their instances again; without it such a file stops the run")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=cmd_batch)

    for add in (add_import_topology, add_serve):   # cli_managers.py: ValueError is bad input
        p = add(sub)
        p.set_defaults(run=_bad_input_on_value_error(p.get_default("run")))
    for p in sub.choices.values():
        _limit_flags(p)
    return parser


def _bad_input_on_value_error(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def checked(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    return checked


def _limit_flags(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("size limits (default: $PLACEMENT_MAX_..., else the built-in "
                                 "one; docs/limits.md)")
    for lim in limits.LIMITS:
        group.add_argument(lim.flag, type=int, default=None, metavar="N",
                           help=f"most {lim.what} (${lim.env}; default {lim.default})")


def _within_limits(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``run(args)`` with the size limits of the --max-... flags in force."""
    with limits.overridden({lim: getattr(args, lim.name.replace("-", "_")) for lim in limits.LIMITS}):
        return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. From the real command line (``argv`` None) a
    :class:`placement.deadline.Guard` also ends the process if ``solve --time-limit`` is
    overrun inside a call that cannot be stopped, or Ctrl-C is not acted on within a
    second; called with ``argv`` (from Python, tests) the process is never ended."""
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "command", None) == "simulate" and not args.policy:
            args.policy = ["lp-rounding"]
        run: Callable[[argparse.Namespace], int] = args.run
        seconds = getattr(args, "time_limit", None) if args.command == "solve" else None
        guarded = args.command == "solve" or (args.command == "batch" and args.executor == "local")
        with deadline.command(seconds, real=argv is None, guarded=guarded) as args.guard:
            return _within_limits(run, args)
    except (BadInput, OutputError, limits.LimitError) as exc:
        print(f"placement: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:  # inside the size limits, yet too large for this machine
        print("placement: error: out of memory: the input is too large for this machine "
              "(lower the size limits of docs/limits.md, or use a smaller input)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # writing stdout or an output: a full disk, /dev/full, an I/O error
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"placement: error: {_one_line(where + (exc.strerror or str(exc)))}", file=sys.stderr)
        if argv is None:  # what stdout still holds would fail again at exit, with a traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        return deadline.interrupted(exc)


def _one_line(text: str) -> str:
    """A message as one line: control characters (a newline in a file name) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


if __name__ == "__main__":
    sys.exit(main())
