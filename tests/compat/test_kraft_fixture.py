"""The checked-in KRaft metadata log (tests/fixtures/kraft-v1) is what its README says it is."""

import json
from pathlib import Path

from fixture_tree import regenerated_differences
from kafka_py import decode_log, unb64

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "kraft-v1"
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text())
METADATA = FIXTURE / MANIFEST["log_dir"] / "__cluster_metadata-0"


def test_fixture_is_reproduced_byte_for_byte_by_its_generator(tmp_path):
    generator = REPO / "tests" / "fixtures" / "generate_kraft.py"
    assert regenerated_differences(FIXTURE, generator, tmp_path / "kraft-v1") == []


def test_kafka_python_decodes_every_batch_with_contiguous_offsets():
    offsets = []
    for base in MANIFEST["segments"]:
        batches = decode_log((METADATA / f"{base:020d}.log").read_bytes())
        assert batches[0]["base_offset"] == base
        offsets += [r["offset"] for b in batches for r in b["records"]]
    assert offsets == list(range(MANIFEST["log_start_offset"], MANIFEST["log_end_offset"]))


def test_snapshot_is_framed_by_its_header_and_footer():
    snapshot = MANIFEST["snapshot"]
    name = "%020d-%010d.checkpoint" % (snapshot["end_offset"], snapshot["epoch"])
    batches = decode_log((METADATA / name).read_bytes())
    assert [b["is_control"] for b in batches] == [True, False, True]
    control_types = [int.from_bytes(unb64(b["records"][0]["key"])[2:4], "big")
                     for b in (batches[0], batches[-1])]
    assert control_types == [3, 4]  # SNAPSHOT_HEADER, SNAPSHOT_FOOTER


def test_topic_ids_are_broker_v1s():
    broker = REPO / "tests" / "fixtures" / "broker-v1" / "log-dir"
    for topic, topic_id in MANIFEST["topic_ids"].items():
        metadata = broker / f"{topic}-0" / "partition.metadata"
        if metadata.exists():
            assert metadata.read_text().endswith(f"topic_id: {topic_id}")
        else:
            assert topic == "removed"
