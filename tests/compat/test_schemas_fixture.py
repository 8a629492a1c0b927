"""The checked-in schema fixture (tests/fixtures/schemas-v1) is what its README says it is."""

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

import schema_check
from fixture_tree import regenerated_differences
from kafka_py import decode_log

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "schemas-v1"
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text())
LOG_DIR = FIXTURE / MANIFEST["log_dir"]
PARTITIONS = [(p["topic"], p["partition"]) for p in MANIFEST["partitions"]]


def test_fixture_is_reproduced_byte_for_byte_by_its_generator(tmp_path):
    generator = REPO / "tests" / "fixtures" / "generate_schemas.py"
    assert regenerated_differences(FIXTURE, generator, tmp_path / "schemas-v1") == []


def test_fixture_is_under_300_kilobytes():
    assert sum(f.stat().st_size for f in FIXTURE.rglob("*") if f.is_file()) < 300_000


def records_of(topic, partition):
    return [r for r in MANIFEST["records"] if (r["topic"], r["partition"]) == (topic, partition)]


@pytest.mark.parametrize("topic,partition", PARTITIONS)
def test_the_manifest_lists_exactly_the_records_in_the_segments(topic, partition):
    on_disk = []
    for log in sorted((LOG_DIR / f"{topic}-{partition}").glob("*.log")):
        for batch in decode_log(log.read_bytes()):
            on_disk += [(r["offset"], r["key"], r["value"]) for r in batch["records"]]
    listed = [(r["offset"], r["key"], r["value"]) for r in records_of(topic, partition)]
    assert on_disk == listed


def test_the_schemas_topic_holds_the_registry_records_for_every_listed_subject():
    state = {}  # (subject, version) -> value, as the registry's store applies its records
    keytypes = []
    for r in records_of("_schemas", 0):
        key = json.loads(base64.b64decode(r["key"]))
        value = None if r["value"] is None else json.loads(base64.b64decode(r["value"]))
        assert key == r["expected_key"]["json"] and value == r["expected_value"]["json"]
        keytypes.append(key["keytype"])
        if key["keytype"] == "SCHEMA":
            assert value["subject"] == key["subject"] and value["version"] == key["version"]
            assert key["magic"] == 1
            state[(key["subject"], key["version"])] = value
        elif key["keytype"] == "DELETE_SUBJECT":
            for (s, v), old in state.items():
                if s == value["subject"] and v <= value["version"]:
                    state[(s, v)] = {**old, "deleted": True}
    assert {"NOOP", "CONFIG", "SCHEMA", "DELETE_SUBJECT"} <= set(keytypes)
    listed = {(s["subject"], s["version"]): s for s in MANIFEST["subjects"]}
    assert set(state) == set(listed)
    for sv, value in state.items():
        s = listed[sv]
        assert (value["id"], value.get("schemaType", "AVRO"), value.get("references", []),
                value["schema"], value["deleted"]) == (
                    s["id"], s["schemaType"], s["references"], s["schema"], s["deleted"])
    assert len({s["id"] for s in MANIFEST["subjects"]}) == len(MANIFEST["subjects"])


def test_orders_has_both_value_versions_in_each_partition_and_every_kind_of_bad_value():
    ids = {}
    errors = set()
    for r in MANIFEST["records"]:
        if r["topic"] == "orders":
            ids.setdefault(r["partition"], set()).add(r["expected_value"]["schema_id"])
            errors.add(r["expected_value"]["error"])
    assert all({3, 4} <= s for s in ids.values()) and len(ids) == 2
    assert errors == {None, "unknown id", "magic byte", "truncated", "not framed"}
    assert any(r["topic"] == "orders" and r["value"] is None for r in MANIFEST["records"])


@pytest.mark.parametrize("topic,partition", [tp for tp in PARTITIONS if tp[0] != "_schemas"])
@pytest.mark.parametrize("side", ["key", "value"])
def test_the_reference_libraries_decode_each_record_as_the_manifest_expects(
        topic, partition, side):
    got = []
    for log in sorted((LOG_DIR / f"{topic}-{partition}").glob("*.log")):
        got += schema_check.check(log, MANIFEST, key=side == "key")
    want = [{"offset": r["offset"], "schema_id": r[f"expected_{side}"]["schema_id"],
             "value": r[f"expected_{side}"]["json"], "error": r[f"expected_{side}"]["error"]}
            for r in records_of(topic, partition)]
    assert got == want


def test_the_schema_check_cli_prints_one_line_per_record():
    log = LOG_DIR / "payments-0" / "00000000000000000000.log"
    out = subprocess.run([sys.executable, str(REPO / "tests" / "compat" / "schema_check.py"),
                          str(log), str(FIXTURE / "manifest.json")],
                         check=True, capture_output=True, text=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["value"] for line in lines] == [
        r["expected_value"]["json"] for r in records_of("payments", 0)]
    assert {tuple(r["expected_value"]["indexes"]) for r in records_of("payments", 0)} >= {
        (0,), (0, 0), (0, 1), (1,), (1, 0, 0)}
