"""Learned sizes (placement.online.sizes) against distributions worked by hand."""
import math

import numpy as np
import pytest

from placement.online.sizes import MIN_CLASS_SAMPLES, LearnedSizes, gittins_index, kaplan_meier


def learned(*sizes, label=None):
    out = LearnedSizes()
    for s in sizes:
        out.add(s, label=label)
    return out


def test_gittins_index_by_hand():
    # remaining 1, 2 or 10, equally likely. D=1: P=1/3, E[min(R,1)]=1 -> 1/3;
    # D=2: P=2/3, E[min(R,2)]=(1+2+2)/3=5/3 -> 2/5; D=10: P=1, E[R]=13/3 -> 3/13. Max: 2/5.
    assert gittins_index([1, 2, 10]) == pytest.approx(0.4)
    # a known size r has index 1/r: the rule is SRPT when sizes are known
    assert gittins_index([7.0]) == pytest.approx(1 / 7)


def test_a_setup_is_paid_whatever_the_size():
    # the same 1, 2 or 10, after a setup of 1: D=1: 1/3 / (1 + 1) = 1/6; D=2: 2/3 / (1 + 5/3)
    # = 1/4; D=10: 1 / (1 + 13/3) = 3/16. Max 1/4 (remaining 4, against 2.5 without it).
    assert gittins_index([1, 2, 10], setup=1.0) == pytest.approx(0.25)
    # a known size r after a setup c: 1 / (r + c)
    assert gittins_index([7.0], setup=3.0) == pytest.approx(1 / 10)
    sizes = learned(1, 2, 10)
    assert sizes.gittins_remaining(0.0, floor=1.0, setup=1.0) == pytest.approx(4.0)
    # where only the prior speaks, the setup adds to its remaining work
    assert LearnedSizes().gittins_remaining(300.0, floor=60.0, setup=5.0) == pytest.approx(125.0)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            gittins_index([1.0], setup=bad)


def test_a_setup_ranks_a_waiting_job_behind_an_equal_running_one():
    # two jobs of equal attained service from one distribution: the one that must restart
    # first has the lower index, so it does not displace the other
    sizes = learned(1, 2, 10, 40)
    running = sizes.gittins_remaining(1.5, floor=1.0)
    waiting = sizes.gittins_remaining(1.5, floor=1.0, setup=0.2)
    assert waiting > running


def test_gittins_remaining_conditions_on_what_was_attained():
    sizes = learned(1, 2, 10)
    assert sizes.gittins_remaining(0.0, floor=1.0) == pytest.approx(2.5)      # 1 / 0.4
    # past 1.5 the job is 2 or 10: D=0.5: P=1/2, E[min]=(0.5+0.5)/2=0.5 -> 1; D=8.5: P=1,
    # E=(0.5+8.5)/2=4.5 -> 0.222. Index 1, remaining 1.
    assert sizes.gittins_remaining(1.5, floor=1.0) == pytest.approx(1.0)
    # past 2 only 10 is left: the remaining work is 8
    assert sizes.gittins_remaining(2.0, floor=1.0) == pytest.approx(8.0)


def test_expected_total_is_the_mean_of_larger_sizes():
    sizes = learned(1, 2, 10)
    assert sizes.expected_total(0.0, floor=1.0) == pytest.approx(13 / 3)
    assert sizes.expected_total(1.0, floor=1.0) == pytest.approx(6.0)        # 1 is not larger than 1
    assert sizes.expected_total(5.0, floor=1.0) == pytest.approx(10.0)


def test_the_prior_at_a_cold_start():
    # nothing finished: the doubling level of what was attained, again (Pareto(2) mean
    # residual), and half of it as the Gittins remaining (hazard 2/a)
    cold = LearnedSizes()
    assert cold.expected_total(0.0, floor=60.0) == pytest.approx(60.0)
    assert cold.gittins_remaining(0.0, floor=60.0) == pytest.approx(30.0)
    assert cold.expected_total(300.0, floor=60.0) == pytest.approx(300.0 + 240.0)   # level 60 * 4
    assert cold.gittins_remaining(300.0, floor=60.0) == pytest.approx(120.0)


def test_beyond_every_size_seen_the_tail_is_memoryless():
    # past the largest finished size (2), a job needs that much more whatever its age: its
    # rank stops changing as it runs, so two such jobs keep their order
    sizes = learned(1, 2)
    assert sizes.expected_total(5.0, floor=1.0) == pytest.approx(5.0 + 2.0)
    assert sizes.gittins_remaining(5.0, floor=1.0) == pytest.approx(2.0)
    assert sizes.gittins_remaining(500.0, floor=1.0) == sizes.gittins_remaining(5.0, floor=1.0)
    assert sizes.gittins_remaining(5.0, floor=1.0, setup=0.5) == pytest.approx(2.5)
    # per class too: the class's own largest size once it speaks for itself
    for _ in range(MIN_CLASS_SAMPLES):
        sizes.add(10.0, label="big")
    assert sizes.gittins_remaining(50.0, floor=1.0, label="big") == pytest.approx(10.0)


def test_a_class_is_used_alone_once_it_has_enough_samples():
    sizes = learned(100, 100, 100)
    for k in range(MIN_CLASS_SAMPLES - 1):
        sizes.add(2.0, label="small")
    assert sizes.expected_total(0.0, floor=1.0, label="small") == pytest.approx(
        (300 + 2 * (MIN_CLASS_SAMPLES - 1)) / (MIN_CLASS_SAMPLES + 2))    # too few: every job
    sizes.add(2.0, label="small")
    assert sizes.expected_total(0.0, floor=1.0, label="small") == pytest.approx(2.0)
    assert sizes.expected_total(0.0, floor=1.0, label="unknown") == pytest.approx(
        (300 + 2 * MIN_CLASS_SAMPLES) / (MIN_CLASS_SAMPLES + 3))


def test_an_estimate_is_corrected_by_the_observed_ratios():
    sizes = LearnedSizes()
    assert sizes.expected_total(0.0, floor=1.0, estimate=50.0) == pytest.approx(50.0)   # no ratio yet
    assert sizes.gittins_remaining(10.0, floor=1.0, estimate=50.0) == pytest.approx(40.0)
    sizes.add(20.0, estimate=10.0)     # ratio 2
    sizes.add(40.0, estimate=10.0)     # ratio 4
    # an estimate of 50: sizes 100 or 200
    assert sizes.expected_total(0.0, floor=1.0, estimate=50.0) == pytest.approx(150.0)
    assert sizes.expected_total(150.0, floor=1.0, estimate=50.0) == pytest.approx(200.0)
    # past every corrected size: the memoryless tail, the largest corrected size (200) more
    assert sizes.expected_total(250.0, floor=1.0, estimate=50.0) == pytest.approx(250.0 + 200.0)


def test_kaplan_meier_by_hand():
    # events 1, 2, 3, 10; censored 0.5 (never at risk at an event), 5 and 20. At risk:
    # 4 + 2 at 1, 3 + 2 at 2, 2 + 2 at 3, 1 + 1 at 10; survival 5/6, 4/6, 3/6, 1/4
    mass, left = kaplan_meier(np.array([1.0, 2.0, 3.0, 10.0]), np.array([0.5, 5.0, 20.0]))
    assert mass == pytest.approx([1 / 6, 1 / 6, 1 / 6, 1 / 4]) and left == pytest.approx(1 / 4)
    # nothing censored: the empirical distribution; a censored value equal to an event is at risk there
    mass, left = kaplan_meier(np.array([1.0, 2.0, 4.0]), np.zeros(0))
    assert mass == pytest.approx([1 / 3] * 3) and left == pytest.approx(0.0)
    mass, left = kaplan_meier(np.array([2.0]), np.array([2.0]))
    assert mass == pytest.approx([0.5]) and left == pytest.approx(0.5)


def test_weights_are_repeated_samples():
    assert gittins_index([1, 2, 10], weights=[1, 1, 2]) == pytest.approx(gittins_index([1, 2, 10, 10]))
    assert gittins_index([10, 1, 2], setup=1.0, weights=[2, 1, 1]) == pytest.approx(gittins_index([1, 2, 10, 10], 1.0))
    for bad in ([1, 1], [1, 0, 1], [1, -1, 1], [1, math.nan, 1]):
        with pytest.raises(ValueError):
            gittins_index([1, 2, 10], weights=bad)


def test_open_jobs_correct_the_ratios_of_an_estimate():
    sizes = LearnedSizes()
    sizes.add(20.0, estimate=10.0)     # ratio 2
    sizes.add(40.0, estimate=10.0)     # ratio 4
    # a job still open at 3 x its estimate: at risk at ratio 2, so ratio 4 takes its weight
    # (Kaplan-Meier: 1/3 at 2, 2/3 at 4); an estimate of 50: 100 or 200 with those weights
    sizes.censor_ratios([3.0, 0.0])
    assert sizes.expected_total(0.0, floor=1.0, estimate=50.0) == pytest.approx((100 + 2 * 200) / 3)
    # open at 5 x: past every ratio seen; 1/3 at 2, 1/3 at 4, and 1/3 past them, put at 5 + 4
    sizes.censor_ratios([5.0])
    assert sizes.expected_total(0.0, floor=1.0, estimate=50.0) == pytest.approx((100 + 200 + 450) / 3)
    assert sizes.gittins_remaining(150.0, floor=1.0, estimate=50.0) == pytest.approx(
        1 / gittins_index([50.0, 300.0]))
    # past every corrected size the prior speaks as before: the largest corrected size (200) more
    assert sizes.expected_total(250.0, floor=1.0, estimate=50.0) == pytest.approx(250.0 + 200.0)
    # none open: the ratios equally likely again; the learned sizes themselves are not censored
    sizes.censor_ratios([])
    assert sizes.expected_total(0.0, floor=1.0, estimate=50.0) == pytest.approx(150.0)
    assert sizes.expected_total(0.0, floor=1.0) == pytest.approx(30.0)


def test_the_state_round_trips():
    sizes = learned(3.0, 5.0, label="a")
    sizes.add(7.0, estimate=14.0)
    again = LearnedSizes.from_state(sizes.state())
    assert again.state() == sizes.state()
    assert again.gittins_remaining(1.0, floor=1.0) == sizes.gittins_remaining(1.0, floor=1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "3"])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError):
        LearnedSizes().add(bad)


def test_gittins_remaining_is_the_remaining_work_for_a_known_size():
    rng = np.random.default_rng(0)
    for size in rng.uniform(1, 100, 20):
        assert learned(float(size)).gittins_remaining(size / 3, floor=1.0) == pytest.approx(size * 2 / 3)
