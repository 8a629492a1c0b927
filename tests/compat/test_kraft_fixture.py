"""The checked-in KRaft metadata log (tests/fixtures/kraft-v1) is what its README says it is."""

import filecmp
import json
import subprocess
import sys
from pathlib import Path

from kafka_py import decode_log, unb64

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "kraft-v1"
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text())
METADATA = FIXTURE / MANIFEST["log_dir"] / "__cluster_metadata-0"


def test_fixture_is_reproduced_byte_for_byte_by_its_generator(tmp_path):
    out = tmp_path / "kraft-v1"
    subprocess.run([sys.executable, str(REPO / "tests" / "fixtures" / "generate_kraft.py"),
                    str(out)], check=True)
    cmp = filecmp.dircmp(FIXTURE, out)
    stack, differences = [cmp], []
    while stack:
        c = stack.pop()
        differences += [f"{c.left}/{n}" for n in c.left_only + c.right_only + c.funny_files]
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        differences += [f"{c.left}/{n}" for n in mismatch + errors]
        stack += c.subdirs.values()
    assert differences == []


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
