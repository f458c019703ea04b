"""The commands that meet cluster managers where they are: ``import-topology`` (a Slurm,
Kueue or Volcano description of the cluster into an instance skeleton) and ``serve`` (the
online scheduler behind an HTTP JSON API). Kept beside ``cli.py`` so that file stays
small; each ``run_*`` raises ``ValueError`` (one line, naming the file and place) for
input it cannot use, which ``cli.py`` prints and turns into exit code 2.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from placement.online.knowledge import INFORMATION
from placement.outputs import check_outputs, json_text, write_text

#: what each ``import-topology`` kind reads (its positional file, and its --nodes file)
KINDS = {"slurm": ("topology.conf (tree or block plugin)", "slurm.conf (its NodeName lines: Gres=gpu:N, "
                   "CPUs, RealMemory)"),
         "kueue": ("a node list (kubectl get nodes -o json)", None),
         "volcano": ("HyperNodes (YAML or JSON, one document each or a List)",
                     "a node list (kubectl get nodes -o json)")}
DEFAULT_GBPS = "25,100"
DEFAULT_LOCAL_GBPS = 400.0
DEFAULT_STATE = "placement-state.json"


def add_import_topology(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("import-topology", help="a Slurm, Kueue or Volcano cluster as an instance skeleton "
                       "(machines, capacities, tree; no jobs) for --cluster FILE")
    p.add_argument("kind", choices=list(KINDS), help="; ".join(f"{k}: {what}" for k, (what, _) in KINDS.items()))
    p.add_argument("file", help="the kind's topology file (see kind)")
    p.add_argument("--nodes", metavar="FILE", help="slurm: slurm.conf (required); volcano: the node list "
                   "(required); kueue: not used")
    p.add_argument("--levels", metavar="LABEL,...", help="kueue: the Topology's node labels from the top "
                   "down, e.g. cloud.provider.com/topology-block,cloud.provider.com/topology-rack,"
                   "kubernetes.io/hostname")
    p.add_argument("--topology", metavar="YAML", help="kueue: read the levels from a Kueue Topology object "
                   "instead of --levels")
    p.add_argument("--gbps", default=DEFAULT_GBPS, metavar="G,G,...",
                   help="link speed (Gbps) of each tier from the machines up: machine to its switch, "
                   "that switch to its parent, ...; the last repeats above (default "
                   f"{DEFAULT_GBPS}: none of these formats carries bandwidth)")
    p.add_argument("--local-gbps", type=float, default=DEFAULT_LOCAL_GBPS,
                   help=f"a machine's own bus (default {DEFAULT_LOCAL_GBPS:g})")
    p.add_argument("--name", default=None, help="the skeleton's name (default: the file's stem)")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(run=run_import_topology)
    return p


def run_import_topology(args: argparse.Namespace) -> int:
    try:
        from placement.managers import Tiers, import_topology
    except ModuleNotFoundError as exc:
        raise ValueError(_missing_extra(exc)) from None

    check_outputs({"--out": args.out}, [f for f in (args.file, args.nodes, args.topology) if f])
    try:
        gbps = tuple(float(x) for x in args.gbps.split(","))
    except ValueError:
        raise ValueError(f"--gbps: expected link speeds in Gbps separated by commas, got {args.gbps!r}") from None
    tiers = Tiers(gbps=gbps, local_gbps=args.local_gbps)
    levels = [x for x in args.levels.split(",") if x] if args.levels else None
    try:
        skeleton = import_topology(args.kind, args.file, nodes=args.nodes, levels=levels,
                                   kueue_topology=args.topology, tiers=tiers,
                                   name=args.name or Path(args.file).stem)
    except ModuleNotFoundError as exc:   # the kubernetes client, imported when a quantity is read
        raise ValueError(_missing_extra(exc)) from None
    topo = skeleton.topology
    if args.out:
        write_text(args.out, json_text(skeleton.to_dict()))
        depth = max(topo.depth(m.id) for m in topo.machines)
        print(f"wrote {args.out}: {len(topo.machines)} machines, {len(topo.switches)} switches, depth {depth}, "
              f"{sum(m.capacity.get('gpu', 0) for m in topo.machines):g} GPUs")
    else:
        print(json.dumps(skeleton.to_dict(), indent=1))
    return 0


def _missing_extra(exc: ModuleNotFoundError) -> str:
    return (f"placement import-topology needs the [managers] extra ({exc.name} is not installed): "
            'pip install "placement[managers]"')


def add_serve(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="the online scheduler behind an HTTP JSON API (pip install "
                       "\"placement[serve]\"; OpenAPI at /docs)")
    p.add_argument("--cluster", required=True, help="racks:RxM, star:N, pai:N or an instance file (e.g. "
                   "an imported skeleton)")
    p.add_argument("--port", type=int, default=8000, help="default 8000")
    p.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    p.add_argument("--state", default=DEFAULT_STATE, metavar="FILE",
                   help=f"every accepted change is checkpointed here; an existing file is resumed "
                   f"(default {DEFAULT_STATE} in the working folder)")
    p.add_argument("--policy", default="lp-rounding", help="an online policy (default lp-rounding)")
    p.add_argument("--information", default="oracle", choices=INFORMATION,
                   help="what the scheduler is told of job lengths (docs/model.md; default oracle)")
    p.add_argument("--lookahead", type=int, default=8, help="slots a policy may plan ahead (default 8)")
    p.add_argument("--slot-seconds", type=float, default=None,
                   help="slot length (default: the instance file's, else 300)")
    p.set_defaults(run=run_serve)
    return p


def run_serve(args: argparse.Namespace) -> int:
    from placement.serve import serve

    return serve(cluster=args.cluster, host=args.host, port=args.port, state=args.state,
                 policy=args.policy, information=args.information, lookahead=args.lookahead,
                 slot_seconds=args.slot_seconds)
