"""The __consumer_offsets reader (consumer_offsets.py) and the groups fixture (tests/fixtures/
groups-v1) are what they say they are."""

import json
from pathlib import Path

import consumer_offsets as co
from fixture_tree import regenerated_differences

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "groups-v1"
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text())


def test_partition_choice_is_javas_string_hash_code():
    assert co.java_hash("hello") == 99162322
    assert co.java_hash("etl") == 100765
    assert co.java_hash("polygenelubricants") == -(1 << 31)  # Utils.abs(MIN_VALUE) is 0
    assert co.partition_for("polygenelubricants", 50) == 0
    assert co.java_hash("zzzzzzzz") == -1910022912
    assert co.partition_for("zzzzzzzz", 50) == 12
    assert co.partition_for("hello", 50) == 22
    assert co.partition_for("etl", 50) == 15


def test_every_value_version_round_trips():
    for version in range(5):
        value = co.offset_value(version, 42, "meta", 1000, leader_epoch=3, expire_ts=2000,
                                topic_id=bytes(16))
        decoded = co.decode_value(value)
        assert (decoded["version"], decoded["offset"], decoded["metadata"]) == (version, 42, "meta")
        assert decoded["leader_epoch"] == (3 if version >= 3 else -1)
        assert decoded.get("expire_timestamp") == (2000 if version == 1 else None)
    assert co.decode_key(co.offset_key("g", "t", 7)) == {
        "kind": "offset", "version": 1, "group": "g", "topic": "t", "partition": 7}
    assert co.decode_key(co.group_key("g"))["kind"] == "group"


def test_fixture_is_reproduced_byte_for_byte_by_its_generator(tmp_path):
    generator = REPO / "tests" / "fixtures" / "generate_groups.py"
    assert regenerated_differences(FIXTURE, generator, tmp_path / "groups-v1") == []


def test_reader_finds_the_manifests_groups_in_kafkas_partitions():
    reading = co.read_log_dir(FIXTURE / MANIFEST["log_dir"])
    assert reading["partition_count"] == MANIFEST["offsets_partitions"]
    found = {}
    for c in reading["commits"]:
        assert c["dir"] == c["expected_dir"] == MANIFEST["placement"][c["group"]]
        if c["topic"] == "orders":
            found.setdefault(c["group"], {})[str(c["partition"])] = c["offset"]
    assert found == MANIFEST["groups"]["orders"]
    versions = {c["version"] for c in reading["commits"]}
    assert {2, 3, 4} <= versions
