"""Topology import from cluster managers: a cluster as Slurm (topology.conf + slurm.conf),
Kueue (a node list + the Topology's levels) or Volcano (HyperNodes + a node list)
describes it, turned into an instance skeleton (our topology tree, no jobs) that
``--cluster FILE`` reads. docs/managers.md says what each format maps to and the choices
made where the formats are silent.
"""
from __future__ import annotations

from pathlib import Path

from placement.managers.kueue import read_kueue
from placement.managers.slurm import read_slurm
from placement.managers.tree import Tiers, TopologyFileError, skeleton
from placement.managers.volcano import read_volcano
from placement.model.instance import Instance

__all__ = ["KINDS", "Tiers", "TopologyFileError", "import_topology", "read_kueue", "read_slurm", "read_volcano",
           "skeleton"]

KINDS = ("slurm", "kueue", "volcano")


def import_topology(kind: str, file: str, *, nodes: str | None = None, levels: list[str] | None = None,
                    kueue_topology: str | None = None, tiers: Tiers = Tiers(), name: str | None = None) -> Instance:
    """The skeleton of the cluster ``file`` describes: slurm (``file`` topology.conf, ``nodes``
    slurm.conf), kueue (``file`` the node list; ``levels`` or ``kueue_topology``, one of
    them) or volcano (``file`` the HyperNodes, ``nodes`` the node list). Bad input raises a
    ``ValueError`` (a :class:`TopologyFileError` for a file) of one line."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: expected {', '.join(KINDS)}")
    if kind != "kueue" and (levels is not None or kueue_topology is not None):
        raise ValueError(f"--levels and --topology are for kueue, not {kind}")
    if kind == "kueue":
        if nodes is not None:
            raise ValueError("kueue reads the node list given as FILE; --nodes is not used")
        topology = read_kueue(file, levels=levels, topology=kueue_topology, tiers=tiers)
    elif nodes is None:
        raise ValueError("slurm needs slurm.conf for the nodes' GPUs, CPUs and memory: --nodes slurm.conf"
                         if kind == "slurm" else
                         "volcano needs the node list for the nodes' capacities and labels: --nodes nodes.json "
                         "(kubectl get nodes -o json)")
    elif kind == "slurm":
        topology = read_slurm(file, nodes, tiers)
    else:
        topology = read_volcano(file, nodes, tiers)
    return skeleton(topology, name if name is not None else Path(file).stem)
