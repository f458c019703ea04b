"""Schedule files: well-formedness (bad input) as opposed to validity (verdicts)."""
import json

import pytest

from placement.model.schedule import Allocation, Schedule, ScheduleError, Slot

from ..conftest import write

DOC = {"instance": "tiny", "solver": "greedy", "objective": 12.5, "slots": [
    {"t": 0, "allocations": [{"job": "j0", "machine": "m0", "workers": 4, "ps": 2}]},
    {"t": 1, "allocations": [{"job": "j0", "machine": "m0", "workers": 2, "ps": 1},
                             {"job": "j0", "machine": "m1", "workers": 2, "ps": 1}]}]}


def test_round_trip_keeps_extra_keys(tmp_path):
    s = Schedule.from_dict(DOC)
    assert s.instance == "tiny" and s.extra == {"solver": "greedy", "objective": 12.5}
    assert s.slots[1].allocations[1] == Allocation("j0", "m1", 2, 1)
    assert s.to_dict() == DOC
    path = tmp_path / "s.json"
    s.save(path)
    assert Schedule.load(path) == s and json.loads(path.read_text()) == DOC


def test_duplicates_are_kept_for_the_validator():
    doc = {"slots": [{"t": 0, "allocations": []}, {"t": 0, "allocations": []}]}
    assert [s.t for s in Schedule.from_dict(doc).slots] == [0, 0]


@pytest.mark.parametrize("doc, expected", [
    ([], "document: must be a JSON object"),
    ({}, "slots: missing required key"),
    ({"slots": {}}, "slots: must be a JSON array"),
    ({"slots": [{"allocations": []}]}, "slots[0].t: missing required key"),
    ({"slots": [{"t": "0", "allocations": []}]}, "slots[0].t: must be an integer, got '0'"),
    ({"slots": [{"t": 0}]}, "slots[0].allocations: missing required key"),
    ({"slots": [{"t": 0, "allocations": [], "note": 1}]}, "slots[0].note: unknown key"),
    ({"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m", "workers": 2.0, "ps": 1}]}]},
     "slots[0].allocations[0].workers: must be an integer, got 2.0"),
    ({"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m", "workers": True, "ps": 1}]}]},
     "slots[0].allocations[0].workers: must be an integer, got true"),
    ({"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m", "workers": -1, "ps": 1}]}]},
     "slots[0].allocations[0].workers: must be >= 0"),
    ({"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m", "workers": 1}]}]},
     "slots[0].allocations[0].ps: missing required key"),
    ({"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m", "workers": 1, "ps": 1, "x": 0}]}]},
     "slots[0].allocations[0].x: unknown key"),
    ({"instance": 3, "slots": []}, "instance: must be a string"),
])
def test_malformed_schedules(doc, expected):
    with pytest.raises(ScheduleError) as info:
        Schedule.from_dict(doc)
    assert expected in str(info.value)


def test_truncated_file(tmp_path):
    with pytest.raises(ScheduleError, match="not valid JSON"):
        Schedule.load(write(tmp_path, "s.json", json.dumps(DOC)[:40]))


def test_csv_and_table(tmp_path):
    s = Schedule.from_dict(DOC)
    text = s.to_csv(tmp_path / "s.csv")
    assert text.splitlines() == ["t,job,machine,workers,ps", "0,j0,m0,4,2", "1,j0,m0,2,1", "1,j0,m1,2,1"]
    assert (tmp_path / "s.csv").read_text() == text
    assert s.table(horizon=3).splitlines() == ["job    0    1    2", "j0   4/2 4/2*    ."]
    long = Schedule((Slot(40, (Allocation("j0", "m0", 1, 1),)),))
    assert long.table(max_slots=5).splitlines()[-1] == "... 36 more slots not shown"


def test_from_allocations_sorts_and_drops_empty():
    s = Schedule.from_allocations({2: [Allocation("a", "m", 1, 1)], 0: [], 1: [Allocation("a", "m", 1, 1)]},
                                  instance="x", solver="test")
    assert [sl.t for sl in s.slots] == [1, 2] and s.extra == {"solver": "test"}
