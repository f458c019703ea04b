"""OASiS as its paper states it: the price constants on a hand-worked example (every
number computed by hand in the comments), ``oasis-admit-all`` (same prices, no
rejection), and the admission metrics the simulator reports beside the JCTs."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from placement.online.baselines import BASELINES, FIFO, OASiS, OASiSAdmitAll, PriceTerms
from placement.online.policy import JobState, View
from placement.online.registry import POLICIES
from placement.slots.residual import Residual
from placement.simulate import simulate

from .. import builders as B


# ----- the hand-worked example ---------------------------------------------------------------
# Two machines m0, m1 of <4 GPU, 16 CPU> under one switch, slots of 10 s, lookahead 2.
# Normalisation C = (4, 16); the cluster's capacity sum_h sum_r c_hr / C_r = 2 x (1 + 1) = 4.
# Every batch takes 1 s anywhere (no gradient), kappa = 1, no restart.
#
# Job a: worker <1 GPU>, PS <1 CPU>, 1..2 workers, 40 batches, weight 1.
#   window (rule 1): 1 worker does 10 batches a slot -> 4 slots; T_a = 0 + 4 + 2 = 6
#   earliest completion: 2 workers, 20 a slot -> 2 slots -> slot 1; f_a(1) = 1 x (6-1) x 10 = 50
#   alpha = (1/4, 0), beta = (0, 1/16); CPU is PS-only, so its alpha_i^r is the PS's 1/16
#   U terms: (50 / 0.25, 50 / 0.0625) = (200, 800)
#   worker-slots ceil(40 x 1 / 10) = 4; demand = 4 x (1/4 + 0 + 0 + 1/16) = 1.25
#   L term f_a(T_a - 1) / demand = (1 x 1 x 10) / 1.25 = 8; 1/mu term 1.25 / 6 = 5/24
# Job b: worker <2 GPU, 2 CPU>, PS <4 CPU>, exactly 1 worker, 25 batches, weight 2.
#   window: 10 a slot -> 3 slots; T_b = 0 + 3 + 2 = 5; earliest completion the same, slot 2;
#   f_b(2) = 2 x (5-2) x 10 = 60
#   alpha = (2/4, 2/16) = (0.5, 0.125), beta = (0, 4/16) = (0, 0.25)
#   U terms: (60 / 0.5, 60 / 0.125) = (120, 480)
#   worker-slots ceil(25 / 10) = 3; demand = 3 x (0.5 + 0.125 + 0 + 0.25) = 2.625
#   L term (2 x 1 x 10) / 2.625 = 160/21 = 7.619...; 1/mu term 2.625 / 5 = 0.525
# Constants:
#   U = max of the U terms = (200, 800)
#   1/mu = min(5/24, 0.525) / 4 = 5/96
#   L = 1/(2 mu) x min(8, 160/21) = 1/2 x 5/96 x 160/21 = 25/126 = 0.19841...
L_HAND = 25 / 126
U_HAND = (200.0, 800.0)


def example() -> tuple[View, dict]:
    topo = B.star(B.machine("m0", gpu=4, cpu=16), B.machine("m1", gpu=4, cpu=16))
    a = B.job("a", max_workers=2, work_batches=40)
    b = B.job("b", max_workers=1, work_batches=25, weight=2, worker={"gpu": 2, "cpu": 2},
              ps={"cpu": 4})
    return state_view(0, topo, a, b), {"a": a, "b": b, "topo": topo}


def state_view(t: int, topo, *jobs, lookahead: int = 2, **done: float) -> View:
    inst = B.instance(topo, *jobs, T=t + lookahead)
    return View(t, inst, {j.id: JobState(j, done.get(j.id, 0.0), 0.0, {}, None) for j in jobs},
                lookahead)


def test_price_terms_and_constants_equal_the_hand_worked_ones():
    v, _ = example()
    policy = OASiS()
    scale = OASiS.scale(Residual(v.instance))
    assert scale == pytest.approx([4, 16])
    ta, tb = policy.price_terms(v, "a", scale), policy.price_terms(v, "b", scale)
    assert ta.top == pytest.approx((200, 800)) and ta.least == pytest.approx(8)
    assert ta.share == pytest.approx(5 / 24)
    assert tb.top == pytest.approx((120, 480)) and tb.least == pytest.approx(160 / 21)
    assert tb.share == pytest.approx(0.525)
    low, high = policy.bounds(v, scale)
    assert low == pytest.approx(L_HAND, rel=1e-12)
    assert high == pytest.approx(U_HAND, rel=1e-12)


def test_the_constants_do_what_the_paper_derives_them_for():
    v, jobs = example()
    low, high = OASiS().bounds(v, OASiS.scale(Residual(v.instance)))
    # L: the initial dual, L x (window slots) x (cluster capacity 4), is at most half of
    # each job's least utility: a: 25/126 x 6 x 4 = 4.76 <= 10 / 2; b: 3.97 <= 20 / 2
    assert low * 6 * 4 <= 10 / 2 and low * 5 * 4 <= 20 / 2
    # U: at full use one worker's demand costs at least the job's largest utility:
    # a: 200 x 1/4 = 50 >= 50; b: 200 x 2/4 = 100 >= 60 and 800 x 2/16 = 100 >= 60
    assert high[0] * 0.25 >= 50 and high[0] * 0.5 >= 60 and high[1] * 0.125 >= 60


def test_prices_on_a_half_used_machine_equal_the_hand_worked_ones():
    v, jobs = example()
    policy = OASiS()
    res = Residual(v.instance)
    low, high = policy.bounds(v, OASiS.scale(res))
    # 2 workers <1 GPU> and 2 PSs <4 CPU> on m0: half its GPUs (2/4) and CPUs (8/16), so
    # p = L (U/L)^(1/2) = sqrt(U L): GPU sqrt(200 x 25/126) = 6.2994..., CPU sqrt(800 x
    # 25/126) = 12.5988...; m1 is idle: L = 0.19841... on both
    res.place(B.job("x", max_workers=2, ps={"cpu": 4}), {"m0": (2, 2)})
    prices = OASiS.prices(res, low, high)
    assert prices[0] == pytest.approx([math.sqrt(200 * 25 / 126), math.sqrt(800 * 25 / 126)])
    assert prices[0] == pytest.approx([6.29940788, 12.59881577])
    assert prices[1] == pytest.approx([L_HAND, L_HAND])


def test_the_best_offer_on_an_idle_cluster_costs_the_hand_worked_amount():
    v, jobs = example()
    idle = lambda t: Residual(v.instance)  # noqa: E731
    offer = OASiS().offer(v, "a", idle)
    # 2 workers + 2 PSs on one machine in slots 0 and 1 (completes in slot 1, f = 50):
    # per slot 2 x 1/4 GPU + 2 x 1/16 CPU = 0.625 normalised units at L:
    # 2 x 0.625 x 25/126 = 0.24801...
    assert offer.plan in ({0: {"m0": (2, 2)}, 1: {"m0": (2, 2)}},
                          {0: {"m1": (2, 2)}, 1: {"m1": (2, 2)}})
    assert offer.utility == pytest.approx(50)
    assert offer.cost == pytest.approx(2 * 0.625 * 25 / 126)
    assert OASiS().commit(v, "a", idle) == offer.plan  # payoff 49.75 > 0: admitted


def test_constants_are_fixed_per_job_at_first_sight_and_survive_a_checkpoint():
    v, jobs = example()
    policy = OASiS()
    scale = OASiS.scale(Residual(v.instance))
    first = policy.bounds(v, scale)
    # slot 3: a has done 30 batches and b has left (completed): the constants stay
    later = state_view(3, jobs["topo"], jobs["a"], a=30.0)
    low, high = policy.bounds(later, scale)
    assert low == pytest.approx(first[0]) and high == pytest.approx(first[1])
    # a resumed policy holds the same terms (JSON round trip)
    resumed = OASiS()
    resumed.load_state(json.loads(json.dumps(policy.state())))
    low, high = resumed.bounds(later, scale)
    assert low == pytest.approx(L_HAND) and high == pytest.approx(U_HAND)
    # a new job enters through its own terms only: c (1 worker <1 GPU>, PS <1 CPU>, 10
    # batches, arrives at 3): window 1 + 2 -> T_c = 6, f_c(3) = 30, U terms (120, 480),
    # demand 1 x 0.3125: L term 10 / 0.3125 = 32, 1/mu term 0.3125 / 3 = 0.104...; U keeps
    # its max (200, 800) and L its min term 160/21, but 1/mu falls to min(5/24, 0.525,
    # 0.104) / 4 = 0.026: L = 1/2 x 0.3125/12 x 160/21 = 0.0992...
    c = B.job("c", arrival=3, max_workers=1, work_batches=10)
    low, high = policy.bounds(state_view(3, jobs["topo"], jobs["a"], c, a=30.0), scale)
    tc = policy.price_terms(state_view(3, jobs["topo"], c), "c", scale)
    assert isinstance(tc, PriceTerms) and tc.top == pytest.approx((120, 480))
    assert tc.least == pytest.approx(32) and tc.share == pytest.approx(0.3125 / 3)
    assert high == pytest.approx(U_HAND)
    assert low == pytest.approx(0.5 * (0.3125 / 3) / 4 * 160 / 21)


# ----- oasis-admit-all ---------------------------------------------------------------------
def test_admit_all_is_registered_and_shares_the_prices():
    assert POLICIES["oasis-admit-all"] is OASiSAdmitAll is BASELINES["oasis-admit-all"]
    policy = POLICIES["oasis-admit-all"]()
    assert policy.name == "oasis-admit-all" and isinstance(policy, OASiS)
    v, _ = example()
    scale = OASiS.scale(Residual(v.instance))
    (low, high), (low0, high0) = policy.bounds(v, scale), OASiS().bounds(v, scale)
    assert low == low0 == pytest.approx(L_HAND) and list(high) == list(high0)
    idle = lambda t: Residual(v.instance)  # noqa: E731
    assert policy.offer(v, "b", idle) == OASiS().offer(v, "b", idle)


def test_admit_all_plans_a_job_whose_payoff_is_not_positive():
    # as test_baselines.oasis_case: one machine <2 GPU, 16 CPU>, a job of 20 batches on 1
    # worker in 10-s slots (2 slots), window 2 + lookahead 2 -> T = 4, f(slot 1) = 30; at
    # a flat price 30 its plan costs 2 x (1/2 + 1/16) x 30 = 33.75 > 30: payoff -3.75
    topo = B.single(B.machine("m0", gpu=2, cpu=16))
    j = B.job("j", max_workers=1, work_batches=20)
    v = state_view(0, topo, j)
    fresh = lambda t: Residual(v.instance)  # noqa: E731
    oasis, admit_all = OASiS(L=30.0, U=30.0), OASiSAdmitAll(L=30.0, U=30.0)
    assert admit_all.offer(v, "j", fresh).payoff == pytest.approx(-3.75)
    assert oasis.commit(v, "j", fresh) == {} and oasis.rejected == {"j"}
    assert admit_all.commit(v, "j", fresh) == {0: {"m0": (1, 1)}, 1: {"m0": (1, 1)}}
    assert admit_all.rejected == frozenset()
    assert admit_all.decide(state_view(0, topo, j)) == {"j": {"m0": (1, 1)}}


# ----- what the simulator reports -------------------------------------------------------------
def blocked_run(policy):
    # a takes all 8 GPUs for slots 0..9 (8 workers x 10 batches = 80 of its 800 a slot);
    # b arrives in slot 1 needing 2 slots inside its window 1 + 2 + lookahead 4 -> T_b = 7,
    # impossible before slot 10: OASiS rejects it; c arrives in slot 12 to a free cluster.
    topo = B.star(B.machine("m0", gpu=4, cpu=16), B.machine("m1", gpu=4, cpu=16))
    jobs = [B.job("a", min_workers=8, max_workers=8, work_batches=800),
            B.job("b", arrival=1, max_workers=1, work_batches=20),
            B.job("c", arrival=12, max_workers=2, work_batches=40)]
    return simulate(jobs, topology=topo, slot_seconds=10, policy=policy,
                    resources=B.RESOURCES, lookahead=4)


def test_the_simulation_reports_acceptance_admitted_jct_and_utility():
    r = blocked_run(OASiS())
    assert r.rejected == ("b",) and r.admitted == ("a", "c")
    assert r.acceptance_rate == pytest.approx(2 / 3)
    # a completes in slot 9 (JCT 100 s), c in slots 12..13 on 2 workers (JCT 20 s); b never
    # runs and is charged MODEL.md's unfinished JCT: (run of 101 slots - arrival 1) x 10
    # + 20 batches x 1 s / 1 worker = 1020 s
    assert r.jct == pytest.approx({"a": 100, "b": 1020, "c": 20})
    assert r.admitted_average_jct == pytest.approx((100 + 20) / 2)
    assert r.average_jct == pytest.approx((100 + 1020 + 20) / 3)
    # utilities (rule 1): T_a = 0 + 10 + 4 = 14, completes in 9: 1 x 5 x 10 = 50;
    # T_c = 12 + 4 + 4 = 20, completes in 13: 7 x 10 = 70
    assert r.utility == pytest.approx({"a": 50, "c": 70})
    assert r.admitted_utility == pytest.approx(120)
    out = r.to_dict(schedule=False)
    assert out["acceptance_rate"] == pytest.approx(2 / 3) and out["rejected"] == ["b"]
    assert out["admitted_average_jct"] == pytest.approx(60)
    assert "1 rejected jobs charged the whole run" in r.summary()


def test_admit_all_runs_every_job_and_plain_policies_report_no_admission():
    r = blocked_run(OASiSAdmitAll())
    assert r.rejected == () and r.acceptance_rate == 1.0 and r.unfinished == ()
    # b waits for a (slots 10, 11): JCT (11 + 1 - 1) x 10 = 110; its utility runs past its
    # window: T_b = 7, f_b(11) = 1 x (7 - 11) x 10 = -40
    assert r.jct == pytest.approx({"a": 100, "b": 110, "c": 20})
    assert r.admitted_average_jct == pytest.approx(r.average_jct)
    assert r.utility == pytest.approx({"a": 50, "b": -40, "c": 70})
    plain = blocked_run(FIFO())
    assert plain.rejected is None and plain.acceptance_rate is None
    assert plain.admitted_average_jct is None and plain.admitted_utility is None
    assert plain.admitted == tuple(plain.jct)
    assert np.isfinite(plain.average_jct)


def test_a_job_that_cannot_be_replanned_is_rejected_or_waits():
    # j ran before (last_ran 0), so commit re-plans it; every slot is fully reserved by
    # others (no GPU left), so no plan completes even in 8x its window. OASiS rejects it
    # (and says so); admit-all commits to waiting this slot, to be planned again next slot.
    topo = B.single(B.machine("m0", gpu=2, cpu=16))
    j = B.job("j", max_workers=1, work_batches=20)
    hog = B.job("hog", max_workers=2, work_batches=1e9, ps={})
    v = state_view(1, topo, j, hog)
    v = View(v.t, v.instance, {**v.jobs, "j": JobState(j, 5.0, 10.0, {}, 0)}, v.lookahead)

    def full(t: int) -> Residual:
        res = Residual(v.instance)
        res.place(hog, {"m0": (2, 0)})
        return res
    oasis, admit_all = OASiS(L=30.0, U=30.0), OASiSAdmitAll(L=30.0, U=30.0)
    assert oasis.commit(v, "j", full) == {} and "j" in oasis.rejected
    assert admit_all.commit(v, "j", full) == {1: {}} and admit_all.rejected == frozenset()
