"""The configuration window's restart discount (``formulate_configuration(running=...)``):
a running job's other worker counts and GPU types keep H / (H + r) of their rate."""
from __future__ import annotations

import math

import numpy as np
import pytest

from placement.formulation.config_options import count_choices
from placement.formulation.configuration import formulate_configuration
from placement.model.speed import SpeedTable
from placement.model.topology import Machine
from solvers.lp import solve_lp

from .. import builders as B


def option_rates(problem, decoder) -> np.ndarray:
    """Per option, the summed size of its progress coefficients (linear in its rate)."""
    G = problem.G.tocsc()[:, : decoder.n_opt]
    return np.asarray(abs(G).sum(axis=0)).ravel()


def options_of(decoder) -> list[tuple[int, str, int]]:
    doms = decoder.domains
    return [(int(s), doms.nodes[doms.node[int(d)]], int(w))
            for s, d, w in zip(decoder.o_slot, decoder.o_dom, decoder.o_workers)]


def test_only_the_running_count_keeps_its_whole_rate():
    # a restart of 10 s, a configuration held 30 s on average: every other count keeps 30 / 40
    inst = B.instance(B.star(), B.job(restart_seconds=10.0), T=4, delta=10)
    plain, decoder = formulate_configuration(inst, counts="powers", buckets="geometric")
    running, again = formulate_configuration(inst, counts="powers", buckets="geometric",
                                             running={"j": (2, None, 30.0)})
    assert options_of(decoder) == options_of(again)
    ratio = option_rates(running, again) / option_rates(plain, decoder)
    expected = [1.0 if w == 2 else 0.75 for _, _, w in options_of(decoder)]
    assert ratio == pytest.approx(expected)
    assert expected.count(1.0) == 3 * 3      # 2 workers on m0, m1 and spread, in each of the 3 buckets


def test_a_job_not_running_is_not_charged_here():
    # its start: the scheduler's ranks charge it (the Gittins index with a setup)
    inst = B.instance(B.star(), B.job(restart_seconds=20.0), T=2, delta=10)
    plain, decoder = formulate_configuration(inst, counts="powers")
    idle, again = formulate_configuration(inst, counts="powers", running={})
    assert option_rates(idle, again) == pytest.approx(option_rates(plain, decoder))


def test_a_count_the_powers_skip_is_offered_to_the_job_running_at_it():
    # counts 1, 2, 4, 8 ("powers"); the job runs at 3: staying at 3 is an option, at its whole rate
    inst = B.instance(B.star(), B.job(restart_seconds=10.0), T=2, delta=10)
    _, plain = formulate_configuration(inst, counts="powers")
    assert {w for _, _, w in options_of(plain)} == {1, 2, 4, 8}
    running, decoder = formulate_configuration(inst, counts="powers", running={"j": (3, None, 10.0)})
    assert {w for _, _, w in options_of(decoder)} == {1, 2, 3, 4, 8}
    rates = option_rates(running, decoder)
    for k, (_, dom, w) in enumerate(options_of(decoder)):
        if w == 3:   # 3 workers at 1 batch/s each, over a 10-s slot: nothing taken off
            assert rates[k] == pytest.approx(3 * 10 / inst.jobs[0].work_batches, rel=1e-6)
    assert sorted(dom for s, dom, w in options_of(decoder) if w == 3 and s == 0) == ["m0", "m1", "sw"]


def test_count_choices_adds_the_extra_count_in_order():
    low, top = np.array([1, 1, 2, 3, 5]), np.array([8, 8, 6, 2, 5])
    n, counts = count_choices(low, top, "powers", np.array([3, 4, -1, 3, 5]))
    # 3 added between 2 and 4; 4 is a power already; none; top < low: nothing; a single count
    assert n.tolist() == [5, 4, 3, 0, 1]
    assert counts.tolist() == [1, 2, 3, 4, 8, 1, 2, 4, 8, 2, 4, 6, 5]
    assert count_choices(low, top, "powers")[1].tolist() == [1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 6, 5]


def first_slot_choice(inst, running):
    problem, decoder = formulate_configuration(inst, counts="powers", buckets="geometric", running=running)
    x = solve_lp(problem).x[: decoder.n_opt]
    chosen = [o for o, (s, _, _) in enumerate(options_of(decoder)) if s == 0 and x[o] > 0.5]
    assert len(chosen) == 1
    return options_of(decoder)[chosen[0]][1:]


def test_the_window_resizes_a_running_job_only_when_that_pays():
    # linear speed: 8 workers are 8 times as fast, worth a restart even for a job that changes often
    elastic = B.job(max_workers=8, restart_seconds=5.0)
    inst = B.instance(B.star(), elastic, T=4, delta=10)
    assert first_slot_choice(inst, {"j": (1, None, 10.0)})[1] == 8
    # a speed table where 2 workers gain 30% on 1: worth it for a job that keeps its configurations
    # long, not for one that changes about every restart (H = 5 s: keeps 1/2)
    table = SpeedTable(1, (1.0, 1.3), ((2, (1.0, 1.3)),))
    modest = B.job(max_workers=2, restart_seconds=5.0, speed=table)
    inst = B.instance(B.star(), modest, T=4, delta=10)
    assert first_slot_choice(inst, {"j": (1, None, 5.0)})[1] == 1
    assert first_slot_choice(inst, {"j": (1, None, 1e6)})[1] == 2


def test_another_gpu_type_is_a_change_too():
    typed = B.star(Machine("m0", dict(B.CAPACITY), 400, "a"), Machine("m1", dict(B.CAPACITY), 400, "b"))
    inst = B.instance(typed, B.job(restart_seconds=10.0), T=2, delta=10)
    plain, decoder = formulate_configuration(inst, counts="powers")
    running, again = formulate_configuration(inst, counts="powers", running={"j": (2, "a", 10.0)})
    ratio = option_rates(running, again) / option_rates(plain, decoder)
    local = [(k, dom, w) for k, (_, dom, w) in enumerate(options_of(decoder)) if dom != "sw"]
    # 2 workers on m0 (type a) keep their rate; 2 on m1 (type b), or any other count, keep 10 / 20
    assert [ratio[k] for k, _, _ in local] == pytest.approx([1.0 if (dom, w) == ("m0", 2) else 0.5
                                                             for _, dom, w in local])
    assert {dom for _, dom, w in local if w == 2} == {"m0", "m1"}


@pytest.mark.parametrize("hold", [0.0, -1.0, math.nan, math.inf])
def test_a_hold_time_that_is_not_positive_is_refused(hold):
    inst = B.instance(B.star(), B.job(restart_seconds=10.0), T=2, delta=10)
    with pytest.raises(ValueError, match="hold time"):
        formulate_configuration(inst, counts="powers", running={"j": (2, None, hold)})
