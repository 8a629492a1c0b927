"""The checked-in broker corpus (tests/fixtures/broker-v1) is what its README says it is."""

import json
import struct
from pathlib import Path

import pytest

import check_log
from fixture_tree import regenerated_differences
from kafka_py import decode_log

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "broker-v1"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
PARTITIONS = MANIFEST["partitions"]


def test_corpus_is_reproduced_byte_for_byte_by_its_generator(tmp_path):
    generator = REPO / "tests" / "fixtures" / "generate.py"
    assert regenerated_differences(CORPUS, generator, tmp_path / "broker-v1") == []


def test_corpus_is_under_one_megabyte():
    assert sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file()) < 1 << 20


@pytest.mark.parametrize("partition", PARTITIONS, ids=[p["dir"] for p in PARTITIONS])
def test_kafka_python_decodes_every_segment_as_the_manifest_lists_it(partition):
    directory = CORPUS / MANIFEST["log_dir"] / partition["dir"]
    for segment in partition["segments"]:
        log = directory / segment["file"]
        assert log.stat().st_size == segment["size"]
        problems = check_log.compare_batches(decode_log(log.read_bytes()), segment["batches"],
                                             str(log))
        assert problems == []


@pytest.mark.parametrize("partition", PARTITIONS, ids=[p["dir"] for p in PARTITIONS])
def test_index_files_follow_kafkas_invariants(partition):
    directory = CORPUS / MANIFEST["log_dir"] / partition["dir"]
    assert check_log.check_partition(directory, contiguous=False) == []
    for segment in partition["segments"]:
        base = segment["base_offset"]
        stem = directory / segment["file"].removesuffix(".log")
        index = stem.with_suffix(".index").read_bytes()
        assert index == b"".join(struct.pack(">ii", o - base, p) for o, p in segment["index"])
        timeindex = stem.with_suffix(".timeindex").read_bytes()
        assert timeindex == b"".join(struct.pack(">qi", t, o - base)
                                     for t, o in segment["time_index"])


def test_records_list_every_batch_record_once():
    from_batches = [(p["topic"], p["partition"], r["offset"]) for p in PARTITIONS
                    for s in p["segments"] for b in s["batches"] for r in b["records"]]
    listed = [(r["topic"], r["partition"], r["offset"]) for r in MANIFEST["records"]]
    assert listed == from_batches
    assert len(set(listed)) == len(listed)


def test_corpus_covers_every_codec_magic_and_batch_kind():
    batches = [b for p in PARTITIONS for s in p["segments"] for b in s["batches"]]
    kinds = {(b["magic"], b["compression"]) for b in batches}
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        assert (2, codec) in kinds
    for magic in (0, 1):
        for codec in ["none", "gzip", "snappy", "lz4"]:
            assert (magic, codec) in kinds
    assert any(b["is_control"] for b in batches)
    assert any(b["timestamp_type"] == "LogAppendTime" and b["magic"] == 2 for b in batches)
    assert any(b["timestamp_type"] == "LogAppendTime" and b["magic"] == 1 for b in batches)
    assert any(b["records_count"] == 0 for b in batches)
    outcomes = {r["transaction"] for r in MANIFEST["records"]}
    assert {"committed", "aborted"} <= outcomes
    assert sum(1 for p in PARTITIONS for s in p["segments"] if s["txn_index"]) >= 2


def test_txnindex_files_hold_the_aborted_transactions():
    for p in PARTITIONS:
        directory = CORPUS / MANIFEST["log_dir"] / p["dir"]
        for s in p["segments"]:
            path = directory / s["file"].replace(".log", ".txnindex")
            want = b"".join(struct.pack(">hqqqq", 0, e["producer_id"], e["first_offset"],
                                        e["last_offset"], e["last_stable_offset"])
                            for e in s["txn_index"])
            assert (path.read_bytes() if path.exists() else b"") == want
