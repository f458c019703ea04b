"""A cluster named on the command line: a spec, or an instance file whose topology it takes."""
import dataclasses

import pytest

from placement.model.cluster_spec import parse_cluster
from placement.model.instance import Instance

from ..conftest import EXAMPLES


def test_an_instance_file_is_its_topology(tmp_path):
    instance = Instance.load(EXAMPLES / "racks.json")
    skeleton = dataclasses.replace(instance, jobs=(), topology=parse_cluster("racks:3x2"), name="sk")
    skeleton.save(tmp_path / "sk.json")
    assert parse_cluster(str(tmp_path / "sk.json")) == parse_cluster("racks:3x2")
    assert parse_cluster(str(EXAMPLES / "racks.json")) == instance.topology


@pytest.mark.parametrize("name, message", [
    ("missing.json", "cluster '{p}': no such file (a cluster is star:N[@LINK], racks:RxM[@MACHINE/RACK], pai:N "
                     "or an instance file)"),
    ("folder.json", "cluster '{p}': is a directory, not an instance file"),
    ("bad.json", "{p}: not valid JSON: Expecting value at line 1 column 1"),
    ("other.txt", "cluster '{p}': unknown kind '{p}'; expected star:N[@LINK], racks:RxM[@MACHINE/RACK], pai:N or "
                  "an instance file"),
])
def test_a_cluster_file_that_cannot_be_read_is_one_line_naming_it(tmp_path, name, message):
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "bad.json").write_text("nope")
    path = str(tmp_path / name)
    with pytest.raises(ValueError) as info:
        parse_cluster(path)
    assert str(info.value) == message.format(p=path)
