"""The power-mean share (placement.online.sharing) and our Pollux: the exact search over
worker counts, each rule of the objective on a hand-built view (expected counts worked out
by hand in the comments), and the share as lp-rounding's caps below oracle."""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from placement.model.speed import SpeedTable, TypedSpeed
from placement.online.baselines import Pollux
from placement.online.lp_policy import LPRoundingPolicy
from placement.online import sharing
from placement.online.partitions import partitions
from placement.online.sharing import (FLOOR, LINEAR_BEND, SIA_LEFT_OUT, SIA_POWER, bend, bends, capped_view, counts,
                                      share_counts, sia_values, speedup_values, typed_shares)
from placement.online.policy import JobState, View

from .. import builders as B


def brute(values, cost, capacity):
    """The best total over every combination of counts (the reference for ``counts``)."""
    best = -np.inf
    for combo in itertools.product(*(range(len(v)) for v in values)):
        if sum(w * c for w, c in zip(combo, cost)) <= capacity:
            best = max(best, sum(v[w] for v, w in zip(values, combo)))
    return best


def test_counts_is_exact_against_every_combination():
    rng = np.random.default_rng(7)
    for _ in range(200):
        m = int(rng.integers(1, 5))
        values = []
        for _ in range(m):
            v = -np.sort(rng.uniform(0.1, 5, size=int(rng.integers(1, 6))))[::-1].copy()
            v[0] = -100.0
            if rng.random() < 0.3 and len(v) > 2:
                v[1] = -np.inf  # a min_workers of 2
            values.append(v)
        cost = [int(c) for c in rng.integers(0, 3, size=m)]
        capacity = int(rng.integers(0, 9))
        chosen = counts(values, cost, capacity)
        assert sum(w * c for w, c in zip(chosen, cost)) <= capacity
        assert sum(v[w] for v, w in zip(values, chosen)) == pytest.approx(brute(values, cost, capacity))


def test_counts_by_hand():
    # 4 units: (2, 2) totals -1.4, (3, 1) -1.45, (1, 3) -1.85, and a job left out -1000
    a = np.array([-1000, -1, -0.5, -0.45, -0.44])
    b = np.array([-1000, -1, -0.9, -0.85, -0.8])
    assert counts([a, b], [1, 1], 4) == [2, 2]


def linear(id: str, most: int = 8, **kw):
    """An elastic job whose rate is its worker count on one machine (spread: the same)."""
    rates = tuple(float(w) for w in range(1, most + 1))
    return B.job(id, ps={}, max_workers=most, speed=SpeedTable(1, rates, ((2, rates),)), **kw)


def bent(id: str, most: int = 8, p: float = 0.5, **kw):
    """An elastic job whose rate on W workers is W ** p (spread: the same): a speedup that bends."""
    rates = tuple(float(w) ** p for w in range(1, most + 1))
    return B.job(id, ps={}, max_workers=most, speed=SpeedTable(1, rates, ((2, rates),)), **kw)


def flat(id: str, most: int = 8):
    """An elastic job that runs no faster on more than one worker."""
    rates = (1.0,) * most
    return B.job(id, ps={}, max_workers=most, speed=SpeedTable(1, rates, ((2, rates),)))


def view(*jobs, t: int = 0, gpus: int = 8, **states) -> View:
    topo = B.single(B.machine("m0", gpu=gpus))
    inst = B.instance(topo, *jobs, T=t + 4, resources=("gpu",))
    js = {}
    for job in jobs:
        s = dict(done=0.0, attained=0.0, previous={}, last_ran=None)
        s.update(states.get(job.id, {}))
        js[job.id] = JobState(job, **s)
    return View(t, inst, js, 4)


def placed(decision) -> dict[str, int]:
    return {j: sum(w for w, _ in tasks.values()) for j, tasks in decision.items()}


def test_equal_jobs_share_the_cluster_evenly():
    # sum of 1 / speedup with speedups in proportion to the counts: least at an even split
    got = placed(Pollux().decide(view(linear("a"), linear("b"), linear("c"))))
    assert sorted(got.values()) == [2, 3, 3]


def test_every_job_runs_before_any_job_gets_a_second_worker():
    # 4 GPUs, 6 jobs: a job without workers costs 1 / FLOOR, so 4 jobs run on one each
    jobs = [linear(f"j{i}") for i in range(6)]
    got = placed(Pollux().decide(view(*jobs, gpus=4)))
    assert sorted(got.values()) == [1, 1, 1, 1]


def test_a_job_that_does_not_scale_keeps_one_worker():
    # b runs no faster on more workers; a's speedup grows with each: b 1, a the other 7
    assert placed(Pollux().decide(view(linear("a"), flat("b")))) == {"a": 7, "b": 1}


def test_the_restart_factor_by_hand():
    # slot 2 of 10 s: age 30 s; restart 30 s. No change so far: factor (30 - 0) / 60 = 1/2,
    # and a lone linear job still grows from 2 to 8 workers (8/2 > 2/1)
    job = linear("a", restart_seconds=30)
    ran = dict(previous={"m0": (2, 0)}, last_ran=1)
    assert placed(Pollux().decide(view(job, t=2, a=dict(ran, changes=0)))) == {"a": 8}
    # one change already: factor max(30 - 30, 0) / 60 = 0, any other count is worth nothing
    v = view(job, t=2, a=dict(ran, changes=1))
    assert placed(Pollux().decide(v)) == {"a": 2}
    values = speedup_values(v, v.residual(), v.jobs["a"], 1)
    assert values[3] == pytest.approx(-1 / FLOOR)
    assert values[2] > values[3]


# ----- the share as lp-rounding's caps ---------------------------------------------------------
def test_capped_view_cuts_elastic_jobs_to_their_share_and_leaves_gangs():
    gang = B.job("g", ps={}, min_workers=2, max_workers=2)
    v = view(linear("a"), linear("b"), gang)
    capped = capped_view(v, {"a": 3, "b": 0, "g": 1})
    assert capped.jobs["a"].job.max_workers == 3 and capped.jobs["a"].job.speed.max_workers == 3
    assert capped.jobs["b"].job.max_workers == 1             # never below min_workers
    assert capped.jobs["g"].job is v.jobs["g"].job             # a gang as it was
    assert [j.max_workers for j in capped.instance.jobs] == [3, 1, 2]
    assert v.jobs["a"].job.max_workers == 8                    # the view given is unchanged


def test_capped_view_never_caps_a_running_job_below_the_workers_it_runs_on():
    # a ran on 5 workers last slot, b on 1: a's cap is 5 (not its share of 3), b's its share
    v = view(linear("a"), linear("b"), a=dict(previous={"m0": (5, 0)}, last_ran=0),
             b=dict(previous={"m0": (1, 0)}, last_ran=0), t=1)
    capped = capped_view(v, {"a": 3, "b": 3})
    assert capped.jobs["a"].job.max_workers == 5 and capped.jobs["a"].job.speed.max_workers == 5
    assert capped.jobs["b"].job.max_workers == 3
    # a job running on more than its max_workers keeps its own cap; min_workers above the share wins
    w = view(linear("c", most=4), B.job("d", ps={}, min_workers=3, max_workers=8,
                                        speed=SpeedTable(3, tuple(float(x) for x in range(3, 9)),
                                                         ((2, tuple(float(x) for x in range(3, 9))),))),
             c=dict(previous={"m0": (6, 0)}, last_ran=0), t=1)
    capped = capped_view(w, {"c": 2, "d": 1})
    assert capped.jobs["c"].job is w.jobs["c"].job and capped.jobs["d"].job.max_workers == 3


def test_bend_is_the_exponent_of_a_power_speedup():
    for p in (0.0, 0.3, 0.5, 0.8, 1.0):
        rate = np.array([0.0] + [w ** p for w in range(1, 17)])
        assert bend(rate, 1) == pytest.approx(p)
    # from a job's fewest workers: rate (W / 2) ** 0.5 above W = 2
    assert bend(np.array([0.0, 0.0] + [(w / 2) ** 0.5 for w in range(2, 17)]), 2) == pytest.approx(0.5)
    assert bend(np.array([0.0, 1.0]), 1) == 1.0                 # one count: nothing bends
    # counts slower than the fewest workers are not fitted: a linear speedup measured at
    # 1, 2, 4, 8 only (the Sia arena's placeholders, 1e-6 x the fastest, elsewhere) is linear
    sparse = np.array([0.0] + [w if w in (1, 2, 4, 8) else 8e-6 for w in range(1, 9)])
    assert bend(sparse, 1) == pytest.approx(1.0)
    assert bend(np.array([0.0, 1.0, 2.0, 0.5]), 1) == pytest.approx(1.0)


def test_only_elastic_jobs_whose_speedup_bends_are_capped():
    # rates W ** 0.5 and W ** 0.9 bend (p below LINEAR_BEND); linear ones and gangs do not
    gang = B.job("g", ps={}, min_workers=2, max_workers=2)
    v = view(bent("a"), bent("b", p=0.9), linear("c"), gang)
    assert LINEAR_BEND == 0.95
    assert set(share_counts(v, bent_only=True)) == {"a", "b"}
    root = np.array([0.0] + [w ** 0.5 for w in range(1, 9)])
    assert bends(v.jobs["a"].job, root) and not bends(v.jobs["a"].job, np.arange(9.0))
    assert not bends(gang, root)                                # a gang has no count to share


def test_lp_rounding_with_share_caps_keeps_each_bent_job_within_its_share_below_oracle():
    jobs = [bent(f"j{i}", work_batches=1e5 * (i + 1)) for i in range(3)]
    none = dataclasses.replace(view(*jobs), information="none")
    share = share_counts(none)
    assert sum(share.values()) == 8 and max(share.values()) < 8   # every job capped below its 8
    got = placed(LPRoundingPolicy(share_caps=True, threads=1).decide(none))
    assert got and all(got[j] <= share[j] for j in got)
    # jobs whose speedup is linear are left to the window: the caps change nothing
    linears = dataclasses.replace(view(*[linear(f"j{i}", work_batches=1e5 * (i + 1)) for i in range(3)]),
                                  information="none")
    assert (LPRoundingPolicy(share_caps=True, threads=1).decide(linears)
            == LPRoundingPolicy(share_caps=False, threads=1).decide(linears))
    # at oracle the option changes nothing: the sizes are known, the window orders by them
    oracle = view(*jobs)
    assert (LPRoundingPolicy(share_caps=True, threads=1).decide(oracle)
            == LPRoundingPolicy(share_caps=False, threads=1).decide(oracle))


def test_in_one_decision_only_the_bent_jobs_are_capped():
    # a linear job and two bent ones on 8 GPUs at none: the share is taken over all three
    # (the linear job competes for the GPUs) but only the bent jobs are capped, so the
    # decision is lp-rounding's on the view with the bent jobs' caps alone
    for most in (4, 8):
        v = dataclasses.replace(view(linear("a", most=most, work_batches=2e5), bent("b", work_batches=1e5),
                                     bent("c", work_batches=3e5)), information="none")
        full = share_counts(v)
        share = share_counts(v, bent_only=True)
        assert share == {j: full[j] for j in ("b", "c")}
        capped = capped_view(v, share)
        assert capped.jobs["a"].job is v.jobs["a"].job
        got = LPRoundingPolicy(share_caps=True, threads=1).decide(v)
        assert got == LPRoundingPolicy(share_caps=False, threads=1).decide(capped)
        assert all(placed(got)[j] <= share[j] for j in share if j in got)
        free = placed(LPRoundingPolicy(share_caps=False, threads=1).decide(v))
        if most == 4:   # a: 4, b and c: 2 each; uncapped, b takes 4
            assert full == {"a": 4, "b": 2, "c": 2} and placed(got) == full and free["b"] > share["b"]
        else:           # the linear job runs on all 8 GPUs, above its share of 4
            assert full["a"] == 4 and placed(got) == {"a": 8}
    # no job bends: no share is taken
    assert share_counts(view(linear("x"), linear("y")), bent_only=True) == {}


def test_the_default_shares_and_lp_no_share_does_not():
    from placement.online.registry import make_policy
    v = dataclasses.replace(view(bent("a", work_batches=1e5), bent("b", work_batches=2e5),
                                 bent("c", work_batches=3e5)), information="none")
    capped = LPRoundingPolicy(share_caps=True, threads=1).decide(v)
    assert capped != LPRoundingPolicy(share_caps=False, threads=1).decide(v)
    assert LPRoundingPolicy(threads=1).decide(v) == capped
    assert make_policy("lp-rounding").share_caps is True and make_policy("lp-no-share").share_caps is False


def test_a_partitions_share_is_the_share_of_its_machines_alone():
    # two racks of two 8-GPU machines; jobs j0 and j1 (unequal: 16 and 6 workers at most,
    # j1 ran before) on rack 0: every term and the share on rack 0 of the whole cluster equal
    # those on a cluster of rack 0's machines only
    jobs = [linear("j0", most=16), linear("j1", most=6, restart_seconds=30), linear("j2", most=16),
            linear("j3", most=16)]
    topo = B.two_racks()
    inst = B.instance(topo, *jobs, T=4)
    ran = {"j1": dict(previous={"a0": (2, 0)}, last_ran=1, changes=1, done=50.0)}
    states = {j.id: JobState(j, **{**dict(done=0.0, attained=0.0, previous={}, last_ran=None), **ran.get(j.id, {})})
              for j in jobs}
    whole = dataclasses.replace(View(2, inst, states, 4), information="none")
    rack0 = np.array([topo.machine_index["a0"], topo.machine_index["a1"]])
    alone = B.instance(B.star(B.machine("a0"), B.machine("a1")), *jobs[:2], T=4)
    small = dataclasses.replace(View(2, alone, {j: states[j] for j in ("j0", "j1")}, 4), information="none")
    for j in ("j0", "j1"):
        np.testing.assert_array_equal(speedup_values(whole, whole.residual(), states[j], 2, rack0),
                                      speedup_values(small, small.residual(), states[j], 2))
    got = share_counts(whole, ["j0", "j1"], rack0)
    assert got == share_counts(small)
    assert sum(got.values()) == 16 and got["j1"] <= 6
    assert sum(share_counts(whole).values()) == 32      # the whole cluster: all four, 32 GPUs


def test_lp_rounding_caps_each_partitions_jobs_at_the_share_of_that_partition():
    # unequal jobs, three per partition at most: the caps are taken on the partitions the
    # windows solve (capping changes max_workers, by which waiting jobs are dealt), so each
    # job runs on the machines its share was taken on, within that share
    jobs = [bent(f"j{i}", most=m, work_batches=1e5 * (i + 1)) for i, m in enumerate((16, 3, 12, 5, 9, 16))]
    topo = B.two_racks()
    inst = B.instance(topo, *jobs, T=4)
    states = {j.id: JobState(j, done=0.0, attained=0.0, previous={}, last_ran=None) for j in jobs}
    whole = dataclasses.replace(View(0, inst, states, 4), information="none")
    parts = partitions(whole, 3)
    assert len(parts) == 2
    share, home = {}, {}
    for members, machines in parts:
        share.update(share_counts(whole, members, machines))
        home.update({j: {topo.machines[h].id for h in machines} for j in members})
    decision = LPRoundingPolicy(share_caps=True, threads=1, jobs_per_partition=3).decide(whole)
    got = placed(decision)
    assert got and all(got[j] <= share[j] for j in got)
    assert all(set(decision[j]) <= home[j] for j in got)


def typed_bent(id: str, fast: float, most: int = 8) -> object:
    """A job whose rate on W workers is W ** 0.5 on a T4 and ``fast`` times that on an A100."""
    def table(scale: float) -> SpeedTable:
        rates = tuple(scale * float(w) ** 0.5 for w in range(1, most + 1))
        return SpeedTable(1, rates, ((2, rates),))
    return B.job(id, ps={}, max_workers=most, speed=TypedSpeed((("a100", table(fast)), ("t4", table(1.0)))))


def typed_view(*jobs, a100: int = 2, t4: int = 8) -> View:
    topo = B.star(dataclasses.replace(B.machine("fast", gpu=a100), gpu_type="a100"),
                  dataclasses.replace(B.machine("slow", gpu=t4), gpu_type="t4"))
    inst = B.instance(topo, *jobs, T=4, resources=("gpu",))
    return View(0, inst, {job.id: JobState(job, done=0.0, attained=0.0, previous={}, last_ran=None)
                          for job in jobs}, 4)


def test_the_typed_share_gives_each_type_its_own_capacity():
    # Sia's terms: a job's goodput over its slowest (one T4) to the power -0.5, a job left
    # out 1.1, summed and minimised. One A100 (4x a T4) and 8 T4s, two equal jobs of rate
    # sqrt W: one takes the A100 (4 ** -0.5 = 0.5), the other all eight T4s (8 ** -0.25 =
    # 0.59): 1.09, against 2 x 4 ** -0.25 = 1.41 for 4 / 4 on the T4s. Blind to types the
    # share splits the 9 GPUs about evenly, as if each were an A100
    jobs = typed_bent("a", 4.0), typed_bent("b", 4.0)
    assert sorted(typed_shares(typed_view(*jobs, a100=1, t4=8)).values()) == [("a100", 1), ("t4", 8)]
    assert sorted(share_counts(view(bent("a"), bent("b"), gpus=9)).values()) == [4, 5]
    # two A100s: one each (0.5 + 0.5) beats two and eight T4s (5.66 ** -0.5 + 0.59 = 1.01)
    assert typed_shares(typed_view(*jobs, a100=2, t4=8)) == {"a": ("a100", 1), "b": ("a100", 1)}


def test_the_typed_share_leaves_a_job_out_where_another_gains_more_from_the_gpu():
    # one A100 and two T4s, three equal jobs: the A100 and both T4s to two of them
    # (0.5 + 2 ** -0.25 + 1.1 left out = 2.44) beats one GPU each (0.5 + 1 + 1 = 2.5): Sia's
    # cost of leaving a job out is small; Pollux's terms run every job the cluster holds
    jobs = typed_bent("a", 4.0), typed_bent("b", 4.0), typed_bent("c", 4.0)
    picks = typed_shares(typed_view(*jobs, a100=1, t4=2))
    assert sorted(picks.values(), key=str) == [("a100", 1), ("t4", 2), (None, 0)]
    assert SIA_POWER == -0.5 and SIA_LEFT_OUT == 1.1
    assert sorted(share_counts(view(bent("a"), bent("b"), bent("c"), gpus=3)).values()) == [1, 1, 1]


def test_the_typed_share_is_exact_against_every_type_and_count():
    rng = np.random.default_rng(11)
    for _ in range(20):
        jobs = [typed_bent(f"j{i}", float(rng.uniform(1.0, 5.0)), most=int(rng.integers(2, 7)))
                for i in range(int(rng.integers(1, 4)))]
        v = typed_view(*jobs, a100=int(rng.integers(1, 5)), t4=int(rng.integers(1, 7)))
        res = v.residual()
        options = []    # per job: (type, count, value), count 0 with no type
        for j, state in v.jobs.items():
            rates = sharing._rates_by_type(res, state.job)
            opts = [(None, 0, -SIA_LEFT_OUT)]
            for g, rate in rates.items():
                values = sia_values(v, state, rate, slowest=sharing._slowest(rates, state.job), kept=False)
                opts += [(g, w, values[w]) for w in range(1, len(values)) if np.isfinite(values[w])]
            options.append(opts)
        room = {"a100": int(res.cap[0, 0]), "t4": int(res.cap[1, 0])}
        best = max(sum(o[2] for o in combo) for combo in itertools.product(*options)
                   if all(sum(o[1] for o in combo if o[0] == g) <= room[g] for g in room))
        got = typed_shares(v)
        assert all(sum(w for g2, w in got.values() if g2 == g) <= room[g] for g in room)
        value = {(j, g, w): x for j, opts in zip(v.jobs, options) for g, w, x in opts}
        assert sum(value[(j, g, w)] for j, (g, w) in got.items()) == pytest.approx(best)


def test_lp_rounding_caps_each_bent_job_at_its_typed_share_count_on_a_typed_cluster():
    # three equal bent jobs on 2 A100s and 8 T4s: the typed share's counts cap them (the
    # type is the window's to choose); the untyped share would split the 10 GPUs as one type
    v = dataclasses.replace(typed_view(*(typed_bent(f"j{i}", 4.0) for i in range(3)), a100=2, t4=8),
                            information="none")
    picks = typed_shares(v, bent_only=True)
    assert sorted(w for _, w in picks.values()) != sorted(share_counts(v, bent_only=True).values())
    share = LPRoundingPolicy(threads=1).decide(v)
    assert share == LPRoundingPolicy(share_caps=False, threads=1).decide(capped_view(v, {j: w for j, (_, w) in picks.items()}))
    assert share != LPRoundingPolicy(share_caps=False, threads=1).decide(v)
    assert all(placed(share)[j] <= max(1, picks[j][1]) for j in placed(share))
    # at oracle no share: the window alone
    told = dataclasses.replace(v, information="oracle")
    assert LPRoundingPolicy(threads=1).decide(told) == LPRoundingPolicy(share_caps=False, threads=1).decide(told)


def test_the_typed_share_past_its_exact_size_rounds_the_lp_within_one_job_per_type(monkeypatch):
    # the LP relaxation splits at most one job per type (its basic optimum has as many
    # capacity rows); each split job then takes what fits, so the loss is at most that
    rng = np.random.default_rng(5)
    for _ in range(40):
        held = [int(h) for h in rng.integers(0, 7, size=int(rng.integers(1, 4)))]
        options = [[(int(rng.integers(0, len(held))), int(rng.integers(1, 5)), float(rng.uniform(0.1, 3)))
                    for _ in range(int(rng.integers(0, 5)))] for _ in range(int(rng.integers(1, 6)))]
        exact = sharing.typed_counts(options, held)
        monkeypatch.setattr(sharing, "TYPED_WORK", 0)
        rounded = sharing.typed_counts(options, held)
        monkeypatch.undo()
        def value(chosen):
            used = [0] * len(held)
            for mine, c in zip(options, chosen):
                if c >= 0:
                    used[mine[c][0]] += mine[c][1]
            assert all(u <= h for u, h in zip(used, held))
            return sum(mine[c][2] for mine, c in zip(options, chosen) if c >= 0)
        every = [range(-1, len(mine)) for mine in options]
        best = max(value(c) for c in itertools.product(*every)
                   if all(sum(options[i][x][1] for i, x in enumerate(c) if x >= 0 and options[i][x][0] == g) <= h
                          for g, h in enumerate(held)))
        assert value(exact) == pytest.approx(best)
        top = max((gain for mine in options for _, _, gain in mine), default=0.0)
        assert value(rounded) >= best - len(held) * top - 1e-9


def test_the_typed_share_counts_machines_without_a_type_as_a_type_of_their_own():
    topo = B.star(dataclasses.replace(B.machine("fast", gpu=2), gpu_type="a100"), B.machine("plain", gpu=4))
    jobs = [bent("a", most=6), bent("b", most=6)]
    inst = B.instance(topo, *jobs, T=4, resources=("gpu",))
    v = View(0, inst, {j.id: JobState(j, done=0.0, attained=0.0, previous={}, last_ran=None) for j in jobs}, 4, "none")
    picks = typed_shares(v)
    assert {g for g, _ in picks.values()} <= {"a100", None}
    assert sum(w for g, w in picks.values() if g == "a100") <= 2 and sum(w for g, w in picks.values() if g is None) <= 4
    assert LPRoundingPolicy(threads=1).decide(v)
