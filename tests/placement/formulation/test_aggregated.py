"""The aggregated model: a relaxation of the per-machine one, decoded and made valid by the slot rules."""
import pytest

from placement.formulation.aggregated import formulate_aggregated
from placement.offline.ilp import solve_ilp
from placement.formulation.per_machine import formulate_per_machine
from placement.traces.generate import generate
from placement.model.instance import Instance
from placement.slots.rules import build_schedule
from placement.model.evaluate import validate
from solvers.lp import solve_lp
from solvers.rounding import plan_rounding, round_most_likely

from ..conftest import EXAMPLES


@pytest.mark.parametrize("seed", range(12))
def test_aggregated_bound_below_per_machine_bound_and_exact(seed):
    inst = generate(jobs=3, cluster="racks:2x2" if seed % 2 else "star:3", seed=seed)
    agg = solve_lp(formulate_aggregated(inst)[0]).objective
    per_machine = solve_lp(formulate_per_machine(inst)[0]).objective
    assert agg <= per_machine * (1 + 1e-7)
    exact = solve_ilp(inst, time_limit=60)
    if exact.exact and exact.status.value == "optimal":
        assert per_machine <= exact.objective * (1 + 1e-7)


def test_examples_match_hand_checked_bounds():
    for name, value in (("racks", 240.0), ("bottleneck", 280.0)):
        problem, _ = formulate_aggregated(Instance.load(EXAMPLES / f"{name}.json"))
        assert solve_lp(problem).objective == pytest.approx(value, rel=1e-6)


def test_decoded_lp_becomes_a_valid_schedule():
    inst = generate(jobs=8, cluster="racks:2x4", seed=5)
    problem, decoder = formulate_aggregated(inst)
    x = solve_lp(problem).x
    plan = decoder.decode(round_most_likely(plan_rounding(problem, x)))
    assert any(plan.slots)
    assert validate(inst, build_schedule(inst, plan)) == []


def test_domain_restriction_and_window():
    inst = generate(jobs=4, cluster="racks:2x2", seed=2)
    only = {j.id: {"r0m0"} for j in inst.jobs}
    problem, decoder = formulate_aggregated(inst, start=1, end=3, domains=only)
    doms = {decoder.domains.nodes[decoder.domains.node[d]] for d in decoder.opt_dom}
    assert doms <= {"r0m0"} and set(decoder.opt_slot.tolist()) <= {1, 2}
    with pytest.raises(ValueError, match="window"):
        formulate_aggregated(inst, start=3, end=2)
