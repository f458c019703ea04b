"""The configuration window in geometric time buckets (issue 18) and the decoder that packs
each slot's choices into what the others left (SlotRoom)."""
from __future__ import annotations

import numpy as np
import pytest

from placement.formulation.configuration import formulate_configuration
from placement.formulation.progress_block import geometric_buckets
from placement.formulation.slot_room import SlotRoom
from placement.traces.generate import generate
from solvers.lp import solve_lp

from .. import builders as B


@pytest.mark.parametrize("slots, lengths", [(1, [1]), (2, [1, 1]), (4, [1, 1, 2]), (5, [1, 1, 2, 1]),
                                            (8, [1, 1, 2, 4]), (12, [1, 1, 2, 4, 4])])
def test_geometric_buckets_cover_the_window(slots, lengths):
    assert geometric_buckets(slots) == lengths


def test_a_job_running_flat_out_costs_the_same_in_buckets_and_slots():
    """One job alone, more work than the window holds: it runs at full speed in every slot
    either way, and a bucket charges its progress at its mean slot end, which is what the
    per-slot model charges slot by slot; so the two LP values agree."""
    job = B.job(work_batches=1e6, max_workers=8)
    inst = B.instance(B.single(), job, T=8)
    values = {b: solve_lp(formulate_configuration(inst, buckets=b)[0]).objective for b in ("slots", "geometric")}
    assert values["geometric"] == pytest.approx(values["slots"], rel=1e-9)


def test_buckets_shrink_the_model_and_their_choice_holds_in_every_slot_of_the_bucket():
    inst = generate(jobs=10, cluster="racks:2x4", horizon=8, seed=3)
    per_slot, _ = formulate_configuration(inst, counts="powers")
    problem, decoder = formulate_configuration(inst, counts="powers", buckets="geometric")
    assert problem.n < 0.6 * per_slot.n
    lp = solve_lp(problem)
    x = np.zeros(problem.n)
    x[: decoder.n_opt] = lp.x[: decoder.n_opt] > 0.5
    intent = decoder.decode(x)
    for o in np.flatnonzero(x[: decoder.n_opt]).tolist():
        job = inst.jobs[int(decoder.o_job[o])].id
        held = [intent.slots[t].get(job) for t in range(int(decoder.o_slot[o]), int(decoder.o_until[o]))]
        assert held and all(h == held[0] for h in held)
    assert {int(u - s) for s, u in zip(decoder.o_slot, decoder.o_until)} <= {1, 2, 4}


def test_decoding_only_the_first_slot_gives_the_same_first_slot():
    inst = generate(jobs=24, cluster="racks:2x4", horizon=8, seed=5)
    problem, decoder = formulate_configuration(inst, counts="powers", buckets="geometric")
    _, first_only = formulate_configuration(inst, counts="powers", buckets="geometric", decode_until=1)
    x = np.zeros(problem.n)
    x[: decoder.n_opt] = solve_lp(problem).x[: decoder.n_opt] > 0.5
    whole, first = decoder.decode(x), first_only.decode(x)
    assert whole.slots[0] and first.slots[0] == whole.slots[0]
    assert any(whole.slots[1:]) and not any(first.slots[1:])


def test_lengths_that_do_not_cover_the_window_are_refused():
    from placement.formulation.progress_block import ProgressBlock

    inst = B.instance(B.single(), B.job(), T=4)
    with pytest.raises(ValueError, match="do not cover"):
        ProgressBlock(inst, start=0, end=4, remaining=None, buckets=[1, 1])
    with pytest.raises(ValueError, match="buckets must be one of"):
        formulate_configuration(inst, buckets="weekly")


def test_spread_choices_are_packed_around_each_other():
    """Two jobs of 8 one-GPU workers spread below a switch of two 8-GPU machines: split by
    empty capacity both would go to the same machine; packed, each gets one (with its PSs
    beside it, as the CPUs allow)."""
    inst = B.instance(B.star(), B.job("a"), B.job("b"), T=1)
    room = SlotRoom(inst)
    machines = [m.id for m in inst.topology.machines]
    members = np.arange(2)
    a = room.spread(inst.jobs[0], 1, members, 8, 2, machines)
    b = room.spread(inst.jobs[1], 1, members, 8, 2, machines)
    assert sum(w for w, _ in a.values()) == sum(w for w, _ in b.values()) == 8
    assert sum(s for _, s in a.values()) == sum(s for _, s in b.values()) == 2
    used = {h: 0 for h in machines}
    for tasks in (a, b):
        for h, (w, _) in tasks.items():
            used[h] += w
    assert used == {"m0": 8, "m1": 8}
    assert (room.left[1] >= 0).all()


def test_what_does_not_fit_is_still_placed_for_the_slot_rules_to_repair():
    inst = B.instance(B.star(), B.job("a"), T=1)
    room = SlotRoom(inst)
    tasks = room.spread(inst.jobs[0], 1, np.arange(2), 20, 1, [m.id for m in inst.topology.machines])
    assert sum(w for w, _ in tasks.values()) == 20 and sum(s for _, s in tasks.values()) == 1
