"""The checked-in JBOD broker fixture (tests/fixtures/jbod-v1) is what its README says it is."""

import base64
import json
from pathlib import Path

import pytest

import check_log
import consumer_offsets as co
from fixture_tree import regenerated_differences
from kafka_py import decode_log

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "jbod-v1"
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text())
PARTITIONS = MANIFEST["partitions"]
DIRS = [d["dir"] for d in MANIFEST["log_dirs"]]


def test_fixture_is_reproduced_byte_for_byte_by_its_generator(tmp_path):
    generator = REPO / "tests" / "fixtures" / "generate_jbod.py"
    assert regenerated_differences(FIXTURE, generator, tmp_path / "jbod-v1") == []


def test_fixture_is_under_200_kilobytes():
    assert sum(f.stat().st_size for f in FIXTURE.rglob("*") if f.is_file()) < 200_000


def meta_properties(d):
    lines = (FIXTURE / d / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_the_dirs_belong_to_one_broker_and_each_has_its_own_directory_id():
    metas = [meta_properties(d) for d in DIRS]
    assert {m["cluster.id"] for m in metas} == {MANIFEST["cluster_id"]}
    assert {m["node.id"] for m in metas} == {str(MANIFEST["node_id"])}
    assert {m["version"] for m in metas} == {"1"}
    ids = [m["directory.id"] for m in metas]
    assert ids == [d["directory_id"] for d in MANIFEST["log_dirs"]]
    assert len(set(ids)) == len(ids)
    for d in DIRS:
        assert (FIXTURE / d / ".lock").is_file()
        assert (FIXTURE / d / ".kafka_cleanshutdown").is_file()


def checkpoint(d, name):
    lines = (FIXTURE / d / name).read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}


def test_each_dir_holds_its_partitions_and_checkpoints_only_those():
    seen = set()
    for entry in MANIFEST["log_dirs"]:
        d = entry["dir"]
        on_disk = sorted(p.name for p in (FIXTURE / d).iterdir() if p.is_dir())
        assert on_disk == sorted(entry["partitions"])
        mine = {(p["topic"], p["partition"]): p for p in PARTITIONS if p["log_dir"] == d}
        assert sorted(f"{t}-{n}" for t, n in mine) == on_disk
        assert not seen & set(on_disk)
        seen |= set(on_disk)
        leo = {tp: p["log_end_offset"] for tp, p in mine.items()}
        assert checkpoint(d, "recovery-point-offset-checkpoint") == leo
        assert checkpoint(d, "replication-offset-checkpoint") == leo
        assert checkpoint(d, "log-start-offset-checkpoint") == {
            tp: p["log_start_offset"] for tp, p in mine.items()
            if p["log_start_offset"] > p["segments"][0]}
        assert checkpoint(d, "cleaner-offset-checkpoint") == {
            (c["topic"], c["partition"]): c["offset"] for c in entry["cleaner_offsets"]}
    assert len(seen) == len(PARTITIONS)


@pytest.mark.parametrize("partition", PARTITIONS, ids=[p["dir"] for p in PARTITIONS])
def test_kafka_python_decodes_every_record_as_the_manifest_lists_it(partition):
    directory = FIXTURE / partition["log_dir"] / partition["dir"]
    assert check_log.check_partition(directory, contiguous=True) == []
    logs = sorted(directory.glob("*.log"))
    assert [int(f.stem) for f in logs] == partition["segments"]
    records = [{k: r[k] for k in ("offset", "timestamp", "key", "value", "headers")}
               for f in logs for b in decode_log(f.read_bytes()) for r in b["records"]]
    assert records == partition["records"]
    offsets = [r["offset"] for r in records]
    assert offsets == list(range(partition["segments"][0], partition["log_end_offset"]))
    assert partition["segments"][0] <= partition["log_start_offset"] <= partition[
        "log_end_offset"]


def test_every_record_has_its_own_timestamp_so_a_merge_by_time_has_one_order():
    stamps = [r["timestamp"] for p in PARTITIONS for r in p["records"]]
    assert len(set(stamps)) == len(stamps)
    for p in PARTITIONS:
        ts = [r["timestamp"] for r in p["records"]]
        assert ts == sorted(ts)


def test_the_groups_commits_are_where_the_coordinator_puts_them():
    offsets = [p for p in PARTITIONS if p["topic"] == co.TOPIC]
    assert len(offsets) == MANIFEST["offsets_partitions"]
    latest = {}
    for p in offsets:
        for r in p["records"]:
            key = co.decode_key(base64.b64decode(r["key"]))
            assert co.partition_for(key["group"], len(offsets)) == p["partition"]
            if key["kind"] == "offset":
                value = co.decode_value(base64.b64decode(r["value"]))
                latest.setdefault(key["group"], {}).setdefault(key["topic"], {})[
                    str(key["partition"])] = value["offset"]
    assert latest == MANIFEST["groups"]
