"""GPU types (MODEL.md 8) in the formulations and the LP policy: every model's LP value stays
below the brute-force optimum on small typed instances, the exact ILP equals it (and encodes
every valid typed schedule at its score), the configuration LP, lp-rounding and the exact
solver give the A100s to the job that gains most, decoders emit one type per gang, and the
LP policy's candidates and partitions offer each job the types it runs on."""
from __future__ import annotations

import dataclasses
import random
from functools import cache

import numpy as np
import pytest

from placement.formulation import formulate_aggregated, formulate_configuration, formulate_per_machine
from placement.formulation.tasks import one_type
from placement.formulation.time_indexed import formulate_time_indexed
from placement.model.evaluate import score, validate
from placement.model.instance import Instance, InstanceError, Job
from placement.model.schedule import Allocation, Schedule
from placement.model.speed import SpeedTable, TypedSpeed
from placement.model.topology import Link, Machine, Switch, Topology
from placement.offline.ilp import solve_ilp
from placement.offline.solve import solve
from placement.online import OnlineScheduler, make_policy
from placement.online.candidates import candidate_domains
from placement.online.lp_policy import LPRoundingPolicy
from placement.online.partitions import partitions
from placement.online.policy import JobState, View
from placement.simulate import simulate
from placement.traces.generate import generate
from solvers.check import violations
from solvers.lp import solve_lp
from solvers.result import Status

from ..conftest import bruteforce
from .test_time_indexed import sample_schedules

BF = bruteforce()

#: candidate schedules beyond which a drawn instance is not tiny enough to enumerate
LIMIT = 4000


def _table(rng: random.Random, one: float) -> SpeedTable:
    local = (one, one * rng.uniform(1.2, 1.9))
    spread = (one * rng.uniform(0.6, 1.0), local[1] * rng.uniform(0.5, 1.0))
    return SpeedTable(1, local, ((2, spread),))


def tiny_typed(seed: int) -> Instance:
    """<= 2 jobs on 2-3 machines of 2 GPUs typed "a100" / "t4" (or one untyped), <= 3 slots: jobs
    with a table per type (each type at its own speed, or one type only), one table for every
    type, or linear speed; CPUs of 1-3 so PSs sometimes sit on another machine; restarts now and then."""
    rng = random.Random(seed)
    while True:
        kinds = rng.choice([("a100", "t4"), ("a100", "t4"), ("a100", "t4", "t4"), ("a100", None),
                            ("a100", "a100", "t4")])
        machines = tuple(Machine(f"m{k}", {"gpu": 2, "cpu": rng.choice([1, 2, 3]), "mem": 8}, 50, g)
                         for k, g in enumerate(kinds))
        topo = Topology(machines, (Switch("sw"),), tuple(Link(m.id, "sw", rng.choice([1, 4, 8])) for m in machines),
                        "sw")
        present = sorted({g for g in kinds if g is not None})
        jobs = []
        for k in range(rng.choice([1, 2, 2])):
            one = rng.uniform(5, 20)
            style = rng.choice(["typed", "typed", "one type", "one table", "linear"])
            speed = {"typed": lambda: TypedSpeed(tuple((g, _table(rng, one * rng.uniform(0.5, 3))) for g in present)),
                     "one type": lambda: TypedSpeed(((rng.choice(present), _table(rng, one)),)),
                     "one table": lambda: _table(rng, one), "linear": lambda: None}[style]()
            jobs.append(Job(id=f"j{k}", arrival=rng.choice([0, 0, 1]), work_batches=round(rng.uniform(0.8, 4.0) * one * 10, 1),
                            batch_seconds=0.1, gradient_mb=rng.choice([0, 5]), worker={"gpu": 1}, ps={"cpu": 1},
                            max_workers=2, worker_gbps=1, ps_gbps=rng.choice([1, 2]), weight=rng.choice([1, 2]),
                            restart_seconds=rng.choice([0, 0, 3]), speed=speed))
        try:
            return Instance(slot_seconds=10.0, horizon=rng.choice([2, 3]), resources=("gpu", "cpu", "mem"),
                            topology=topo, jobs=tuple(jobs), name=f"typed{seed}")
        except InstanceError:  # a job that fits none of its types
            continue


@cache
def typed_cases() -> tuple:
    """(instance, brute-force optimum, its schedule) for the enumerable seeds."""
    out = []
    for seed in range(40):
        inst = tiny_typed(seed)
        try:
            best, schedule, _ = BF.optimum(inst, limit=LIMIT)
        except ValueError:
            continue
        out.append((inst, best, schedule))
    return tuple(out)


def _types_used(inst: Instance, schedule: Schedule) -> set[tuple[str, int, str | None]]:
    """(job, slot, GPU type) of every allocation with workers."""
    machines = {m.id: m for m in inst.topology.machines}
    return {(a.job, s.t, machines[a.machine].gpu_type) for s in schedule.slots for a in s.allocations if a.workers}


def test_the_sample_covers_the_interesting_cases():
    runs = typed_cases()
    assert len(runs) >= 18
    speeds = {type(j.speed).__name__ for inst, *_ in runs for j in inst.jobs}
    assert speeds == {"TypedSpeed", "SpeedTable", "NoneType"}
    used = [{g for _, _, g in _types_used(inst, schedule)} for inst, _, schedule in runs]
    assert sum(len(u) >= 2 for u in used) >= 3          # optima that run two types at once
    assert sum("t4" in u for u in used) >= 3            # ... and that use the slower type
    ps_apart = sum(any(a.ps and not a.workers for s in schedule.slots for a in s.allocations)
                   for _, _, schedule in runs)
    assert ps_apart >= 1                                # a PS away from the workers (maybe another type)


@pytest.mark.parametrize("formulate", [formulate_per_machine, formulate_aggregated, formulate_configuration])
def test_every_lp_value_is_below_the_optimum(formulate):
    for inst, best, _ in typed_cases():
        lp = solve_lp(formulate(inst)[0])
        assert lp.status is Status.OPTIMAL, inst.name
        assert lp.objective <= best * (1 + 1e-7), inst.name


def test_the_exact_ilp_equals_brute_force():
    for inst, best, _ in typed_cases():
        out = solve_ilp(inst, time_limit=30)
        assert out.exact and out.status is Status.OPTIMAL, inst.name
        assert out.objective == pytest.approx(best, rel=1e-9, abs=1e-6), inst.name
        assert out.bound == pytest.approx(best, rel=1e-6, abs=1e-6), inst.name
        assert validate(inst, out.schedule) == []


def test_typed_schedules_encode_at_their_score():
    """Every sampled valid typed schedule encodes to a feasible point whose objective is its score
    (the type binaries at its workers' type) and decodes back to itself."""
    typed = 0
    for inst, _, best_schedule in typed_cases()[:12]:
        problem, decoder = formulate_time_indexed(inst)
        typed += decoder.types.n > 0
        for schedule in [best_schedule, *sample_schedules(inst, 8, seed=len(inst.jobs))]:
            x = decoder.encode(schedule)
            assert violations(problem, x) == [], inst.name
            assert problem.objective(x) == pytest.approx(score(inst, schedule).objective, rel=1e-9), inst.name
            back = decoder.decode(x).to_schedule(inst.name)
            assert {(s.t, a) for s in back.slots for a in s.allocations} == \
                {(s.t, a) for s in schedule.slots for a in s.allocations if a.workers or a.ps}
    assert typed >= 5  # models with type binaries among them


def test_the_exact_ilp_keeps_one_type_where_mixing_would_pay():
    """One A100 and one T4 GPU; 2 workers on both would be 2x faster, but a gang uses one type: the
    job runs with one worker (on the A100, faster), 3 slots, where mixing would take 2."""
    machines = (Machine("a", {"gpu": 1, "cpu": 2}, 50, "a100"), Machine("t", {"gpu": 1, "cpu": 2}, 50, "t4"))
    topo = Topology(machines, (Switch("sw"),), (Link("a", "sw", 100), Link("t", "sw", 100)), "sw")
    job = Job(id="j", arrival=0, work_batches=300, batch_seconds=0.1, worker={"gpu": 1}, ps={"cpu": 1}, max_workers=2,
              worker_gbps=1, ps_gbps=2, speed=TypedSpeed((("a100", SpeedTable(1, (10.0, 20.0), ((2, (10.0, 20.0)),))),
                                                          ("t4", SpeedTable(1, (8.0, 16.0), ((2, (8.0, 16.0)),))))))
    inst = Instance(slot_seconds=10.0, horizon=4, resources=("gpu", "cpu"), topology=topo, jobs=(job,), name="one-type")
    best, _, _ = BF.optimum(inst)
    out = solve_ilp(inst, time_limit=30)
    assert best == pytest.approx(30.0) and out.objective == pytest.approx(best)
    assert _types_used(inst, out.schedule) == {("j", t, "a100") for t in range(3)}


def bert_and_speech() -> Instance:
    """One machine of 2 A100s, one of 2 T4s; bert is 4x faster on A100, speech 1.1x. Best: bert on
    the A100s (2 slots of 480 batches), speech on the T4s (2 slots of 120): 120 + 120 s. Swapped,
    bert would need 8 slots."""
    machines = [{"id": "a1", "capacity": {"gpu": 2}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "t1", "capacity": {"gpu": 2}, "local_gbps": 100, "gpu_type": "t4"}]

    def job(name: str, work: float, a100: float, t4: float) -> dict:
        rows = lambda r: {"local": [r, 2 * r], "spread": [r, 2 * r]}  # noqa: E731
        return {"id": name, "arrival": 0, "work_batches": work, "batch_seconds": 1, "worker": {"gpu": 1}, "ps": {},
                "max_workers": 2, "worker_gbps": 1, "ps_gbps": 2,
                "speed": {"by_type": {"a100": rows(a100), "t4": rows(t4)}}}
    return Instance.from_dict({
        "name": "bert-speech", "slot_seconds": 60, "horizon": 4, "resources": ["gpu"],
        "topology": {"root": "s", "machines": machines, "switches": [{"id": "s"}],
                     "links": [{"a": "s", "b": m["id"], "gbps": 100} for m in machines]},
        "jobs": [job("bert", 960, 4.0, 1.0), job("speech", 240, 1.1, 1.0)]})


def _machines_of(tasks: dict) -> dict[str, set[str]]:
    return {job: {h for h, (w, _) in on.items() if w} for job, on in tasks.items()}


def test_the_configuration_lp_gives_the_a100s_to_the_job_that_gains_most():
    inst = bert_and_speech()
    problem, decoder = formulate_configuration(inst)
    lp = solve_lp(problem)
    first = decoder.decode(lp.x).slots[0]
    assert _machines_of({j: intent.tasks for j, intent in first.items()}) == {"bert": {"a1"}, "speech": {"t1"}}
    assert lp.objective <= 240.0


@pytest.mark.parametrize("solver, model", [("exact", "auto"), ("rounding", "configuration")])
def test_solvers_give_the_a100s_to_the_job_that_gains_most(solver, model):
    inst = bert_and_speech()
    solution = solve(inst, solver=solver, model=model)
    assert validate(inst, solution.schedule) == []
    assert solution.objective == pytest.approx(240.0)
    assert solution.certificate.lower_bound <= solution.objective * (1 + 1e-9)
    slot0 = solution.schedule.slots[0]
    assert {(a.job, a.machine) for a in slot0.allocations if a.workers} == {("bert", "a1"), ("speech", "t1")}


def test_lp_rounding_gives_the_a100s_to_the_job_that_gains_most():
    inst = bert_and_speech()
    scheduler = OnlineScheduler(inst.topology, resources=inst.resources, policy=make_policy("lp-rounding"),
                                slot_seconds=inst.slot_seconds)
    for job in inst.jobs:
        scheduler.submit(job)
    assert _machines_of(scheduler.step(0)) == {"bert": {"a1"}, "speech": {"t1"}}
    run = simulate(inst, policy=make_policy("lp-rounding"))
    assert run.violations == () and run.report.objective == pytest.approx(240.0)


def test_configuration_options_keep_a_gang_on_one_type_it_runs_on():
    """Local options sit on machines of a type the job lists; a spread option's machines are of
    one type; a job that runs on one type gets no option elsewhere."""
    inst = bert_and_speech()
    jobs = list(inst.jobs)
    jobs[1] = dataclasses.replace(jobs[1], speed=TypedSpeed((("t4", jobs[1].speed.table("t4")),)))
    inst = dataclasses.replace(inst, jobs=tuple(jobs))
    _, decoder = formulate_configuration(inst)
    types = {m.id: m.gpu_type for m in inst.topology.machines}
    nodes = inst.topology.nodes
    seen = {"bert": set(), "speech": set()}
    for o in range(decoder.n_opt):
        job = inst.jobs[int(decoder.o_job[o])]
        k = int(decoder.o_split[o])
        hosts = [nodes[decoder.o_dom[o]]] if k < 0 else [inst.topology.machines[h].id for h in decoder.splits[k]]
        kinds = {types[h] for h in hosts}
        assert len(kinds) == 1 and job.runs_on(next(iter(kinds)))
        seen[job.id] |= kinds
    assert seen == {"bert": {"a100", "t4"}, "speech": {"t4"}}


def test_per_type_capacity_rows_bind_the_configuration_lp():
    """Two A100-only jobs, one A100 machine of 2 GPUs beside a T4 machine of 8: they must take
    turns (60 + 120 s). The configuration LP, whose per-type rows keep A100 work out of the T4
    capacity, says 180; the aggregated model (a relaxation without them) runs both at once."""
    machines = [{"id": "a1", "capacity": {"gpu": 2, "cpu": 4}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "t1", "capacity": {"gpu": 8, "cpu": 4}, "local_gbps": 100, "gpu_type": "t4"}]
    jobs = [{"id": f"j{k}", "arrival": 0, "work_batches": 240, "batch_seconds": 1, "worker": {"gpu": 1},
             "ps": {"cpu": 1}, "max_workers": 2, "worker_gbps": 1, "ps_gbps": 2,
             "speed": {"by_type": {"a100": {"local": [2, 4], "spread": [2, 4]}}}} for k in range(2)]
    inst = Instance.from_dict({"name": "a100-only", "slot_seconds": 60, "horizon": 3, "resources": ["gpu", "cpu"],
                               "topology": {"root": "s", "machines": machines, "switches": [{"id": "s"}],
                                            "links": [{"a": "s", "b": m["id"], "gbps": 100} for m in machines]},
                               "jobs": jobs})
    assert solve_ilp(inst).objective == pytest.approx(180.0)
    assert solve_lp(formulate_configuration(inst)[0]).objective == pytest.approx(180.0, rel=1e-6)
    assert solve_lp(formulate_aggregated(inst)[0]).objective == pytest.approx(120.0, rel=1e-6)


def test_a_ps_on_another_types_machine_keeps_the_bound():
    """The A100 machine has no CPU for the PS: the only placement is workers on the A100s and the PS
    on the T4 machine (spread, one A100 machine). Every LP still finds it: 60 s, one slot."""
    machines = [{"id": "a1", "capacity": {"gpu": 2}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "t1", "capacity": {"gpu": 8, "cpu": 4}, "local_gbps": 100, "gpu_type": "t4"}]
    job = {"id": "j", "arrival": 0, "work_batches": 240, "batch_seconds": 1, "worker": {"gpu": 1}, "ps": {"cpu": 1},
           "max_workers": 2, "worker_gbps": 1, "ps_gbps": 2, "speed": {"by_type": {"a100": {"local": [2, 4],
                                                                                             "spread": [2, 4]}}}}
    inst = Instance.from_dict({"name": "ps-apart", "slot_seconds": 60, "horizon": 2, "resources": ["gpu", "cpu"],
                               "topology": {"root": "s", "machines": machines, "switches": [{"id": "s"}],
                                            "links": [{"a": "s", "b": m["id"], "gbps": 100} for m in machines]},
                               "jobs": [job]})
    best, schedule, _ = BF.optimum(inst)
    assert best == pytest.approx(60.0) and {a.machine for a in schedule.slots[0].allocations} == {"a1", "t1"}
    for formulate in (formulate_per_machine, formulate_aggregated, formulate_configuration):
        assert solve_lp(formulate(inst)[0]).objective <= best * (1 + 1e-7)
    assert solve_ilp(inst).objective == pytest.approx(best)


def test_decoders_keep_a_gangs_workers_on_one_type():
    inst = bert_and_speech()  # a1: a100, t1: t4
    assert one_type(inst, {"a1": (1, 1), "t1": (2, 0)}) == {"a1": (0, 1), "t1": (2, 0)}
    assert one_type(inst, {"a1": (1, 0), "t1": (1, 1)}) == {"a1": (1, 0), "t1": (0, 1)}  # a tie: the first type
    assert one_type(inst, {"a1": (1, 0), "t1": (2, 0)}) == {"t1": (2, 0)}
    untyped = Topology(tuple(dataclasses.replace(m, gpu_type=None) for m in inst.topology.machines),
                       inst.topology.switches, inst.topology.links, inst.topology.root)
    plain = dataclasses.replace(inst, topology=untyped, jobs=())
    assert one_type(plain, {"a1": (1, 1), "t1": (2, 0)}) == {"a1": (1, 1), "t1": (2, 0)}
    for inst, _, _ in typed_cases()[:10]:
        for formulate in (formulate_per_machine, formulate_aggregated, formulate_configuration):
            problem, decoder = formulate(inst)
            intent = decoder.decode(np.round(solve_lp(problem).x))
            for slot in intent.slots:
                for intent_of_job in slot.values():
                    kinds = {inst.topology.machines[inst.topology.machine_index[h]].gpu_type
                             for h, (w, _) in intent_of_job.tasks.items() if w}
                    assert len(kinds) <= 1, (inst.name, formulate.__name__)


# ----- the LP policy on a typed cluster ------------------------------------------------------------------
FACTOR = {"t4": 1.0, "rtx": 1.7, "a100": 3.0}


def typed_cluster() -> Topology:
    """64 GPUs of 3 types, one rack per type: 6 machines x 4 "t4", 3 x 8 "rtx", 2 x 8 "a100"."""
    machines, links = [], []
    for kind, count, gpus in (("t4", 6, 4), ("rtx", 3, 8), ("a100", 2, 8)):
        for i in range(count):
            machines.append(Machine(f"{kind}{i}", {"gpu": gpus, "cpu": 8 * gpus, "mem": 64 * gpus}, 400, kind))
            links.append(Link(f"{kind}{i}", f"tor-{kind}", 25))
        links.append(Link(f"tor-{kind}", "spine", 100))
    return Topology(tuple(machines), (Switch("spine"), *(Switch(f"tor-{k}") for k in FACTOR)), tuple(links), "spine")


def typed_view(jobs: int, seed: int) -> View:
    """``jobs`` generated jobs, all waiting, each with a table per type it runs on (all three, or
    a subset such as A100 only) at its linear rate times the type's factor, or linear speed."""
    rng = random.Random(seed)
    out = []
    for job in generate(jobs=jobs, cluster="racks:2x4", seed=seed).jobs:
        kinds = rng.choice([("a100", "rtx", "t4"), ("a100", "rtx", "t4"), ("a100",), ("a100", "rtx"), ("rtx", "t4"),
                            None])
        if kinds is not None:
            ws = range(job.min_workers, job.max_workers + 1)
            table = lambda k: SpeedTable(job.min_workers, tuple(FACTOR[k] * w / job.batch_time(400) for w in ws),  # noqa: E731
                                         ((2, tuple(FACTOR[k] * w / job.batch_time(job.worker_gbps) for w in ws)),))
            job = dataclasses.replace(job, speed=TypedSpeed(tuple((k, table(k)) for k in kinds)))
        out.append(dataclasses.replace(job, arrival=0))
    inst = Instance(slot_seconds=300, horizon=6, resources=("gpu", "cpu", "mem"), topology=typed_cluster(),
                    jobs=tuple(out), name="typed-view")
    return View(0, inst, {j.id: JobState(j, 0.0, 0.0, {}, None) for j in inst.jobs}, 6)


def _one_slot(view: View, placed: dict) -> list:
    return validate(view.instance, Schedule.from_allocations(
        {0: [Allocation(j, h, w, s) for j, tasks in placed.items() for h, (w, s) in tasks.items()]}))


def test_candidates_offer_every_type_a_job_runs_on_and_no_other():
    view = typed_view(30, 1)
    topo = view.instance.topology
    type_of = {**{m.id: m.gpu_type for m in topo.machines}, **{f"tor-{k}": k for k in FACTOR}, "spine": None}
    domains, later = candidate_domains(view, partitions(view, 125), local_k=3, spread_k=2)
    for job_id, chosen in domains.items():
        job = view.jobs[job_id].job
        offered = {type_of[d] for d in chosen} - {None}
        assert offered == {k for k in FACTOR if job.runs_on(k)}, job_id
        assert {type_of[d] for d in later[job_id]} - {None} == offered, job_id


def test_partitions_strand_no_job_and_decisions_are_valid():
    """Three partitions of one rack (one type) each: every job lands where a type it runs on holds
    its min_workers, and the decision keeps every rule, MODEL.md 8's included."""
    view = typed_view(60, 2)
    parts = partitions(view, 20)
    assert len(parts) == 3
    for jobs, machines in parts:
        kinds = {view.instance.topology.machines[h].gpu_type for h in machines.tolist()}
        for job_id in jobs:
            assert any(view.jobs[job_id].job.runs_on(k) for k in kinds), job_id
    for model in ("configuration", "aggregated"):
        placed = LPRoundingPolicy(model=model, jobs_per_partition=20).decide(view)
        assert placed and _one_slot(view, placed) == []


def test_the_exact_model_takes_a_typed_job_that_can_never_run():
    """Found by review: a job whose only type holds no worker of it with its PSs (no CPU left
    for 2 PSs) made the exact model's rate rows empty and crash; it simply never runs."""
    from placement.offline.ilp import solve_ilp
    doc = {"slot_seconds": 10, "horizon": 2, "resources": ["gpu", "cpu"],
           "topology": {"root": "s", "machines": [
               {"id": "a", "capacity": {"gpu": 1, "cpu": 1}, "local_gbps": 50, "gpu_type": "a100"},
               {"id": "t", "capacity": {"gpu": 1, "cpu": 0}, "local_gbps": 50, "gpu_type": "t4"}],
               "switches": [{"id": "s"}], "links": [{"a": "a", "b": "s", "gbps": 10}, {"a": "t", "b": "s", "gbps": 10}]},
           "jobs": [{"id": "j", "arrival": 0, "work_batches": 100, "batch_seconds": 1, "worker": {"gpu": 1},
                     "ps": {"cpu": 1}, "max_workers": 1, "worker_gbps": 2, "ps_gbps": 1,
                     "speed": {"by_type": {"a100": {"local": [5], "spread": [5]}}}},
                    {"id": "k", "arrival": 0, "work_batches": 100, "batch_seconds": 1, "worker": {"gpu": 1},
                     "ps": {}, "max_workers": 1, "worker_gbps": 1, "ps_gbps": 1}]}
    typed = solve_ilp(Instance.from_dict(doc), time_limit=20).objective
    doc["jobs"][0]["speed"] = doc["jobs"][0]["speed"]["by_type"]["a100"]
    assert typed == pytest.approx(solve_ilp(Instance.from_dict(doc), time_limit=20).objective)
