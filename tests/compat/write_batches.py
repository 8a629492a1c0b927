#!/usr/bin/env python3
"""Writes batches built by kafka-python for topicfs's decoder to read.

    write_batches.py OUT_DIR

writes OUT_DIR/batches.log (one segment's worth of entries: v2 with every codec, legacy v0 and
v1 with every legacy codec, large values that span several snappy chunks and LZ4 blocks (also
linked ones), null keys and values, headers, LogAppendTime, transactional and control batches, compaction gaps, an
empty batch) and OUT_DIR/expected.json ({"batches": [...]}: what kafka-python decodes from those
bytes, schema in kafka_py.py). Used by tests/compat/compat_kafka_python.rs.
"""

import json
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_py import (  # noqa: E402
    build_control, build_empty_v2, build_legacy, build_v2, decode_log)

T0 = 1767225600000


def records(first, n, size=40, key=True):
    out = []
    for i in range(first, first + n):
        body = (f"record {i} " + "0123456789abcdef" * (size // 16 + 1))[:size]
        out.append({"timestamp": T0 + 10 * i, "key": f"key-{i % 4}".encode() if key else None,
                    "value": body.encode(), "headers": []})
    return out


@contextmanager
def lz4_linked_blocks():
    """kafka-python writes lz4 with independent blocks (as Kafka does); liblz4's default, and
    brokers such as tansu, link them. Build with python-lz4's ``block_linked=True`` meanwhile."""
    import lz4.frame
    import kafka.record.default_records as dr
    saved = dr.lz4_encode
    dr.lz4_encode = lambda payload: lz4.frame.compress(
        bytes(payload), block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    try:
        yield
    finally:
        dr.lz4_encode = saved


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    log = bytearray()
    offset = 0

    def add(entry):
        nonlocal log, offset
        log += entry
        offset = decode_log(entry)[-1]["last_offset"] + 1

    edge = [
        {"timestamp": T0, "key": None, "value": b"null key", "headers": []},
        {"timestamp": T0 + 1, "key": b"null value", "value": None, "headers": []},
        {"timestamp": T0 + 2, "key": b"", "value": b"", "headers": []},
        {"timestamp": T0 - 5000, "key": b"\x00\xff", "value": bytes(range(256)),
         "headers": [("a", b"1"), ("empty", b""), ("null", None), ("\u00e9t\u00e9", b"\xff")]},
        {"timestamp": T0 + 4, "key": None, "value": None, "headers": [("only", b"headers")]},
    ]
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        add(build_v2(edge + records(offset, 6), offset, codec))
    # Values large enough for several xerial snappy chunks (32 KiB) and LZ4 blocks (64 KiB).
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        add(build_v2(records(offset, 3, size=90_000), offset, codec))
    # Linked lz4 blocks (liblz4 makes a frame that fits one block independent, so a large one).
    with lz4_linked_blocks():
        add(build_v2(records(offset, 4, size=90_000), offset, "lz4"))
    for codec in ["none", "lz4"]:
        add(build_v2(records(offset, 4), offset, codec, log_append_time=T0 + 99_000,
                     leader_epoch=5))
    add(build_v2(records(offset, 3), offset, "zstd", producer_id=42, producer_epoch=2,
                 base_sequence=2147483646, transactional=True))  # sequence wraps to 0
    add(build_control("commit", offset, T0 + 50_000, 42, 2, coordinator_epoch=3))
    add(build_v2(records(offset, 2), offset, "snappy", producer_id=43, producer_epoch=0,
                 base_sequence=0, transactional=True))
    add(build_control("abort", offset, T0 + 51_000, 43, 0))
    add(build_v2(records(offset, 3), offset, offset_deltas=[0, 4, 9], last_offset_delta=11))
    add(build_empty_v2(offset, 3, T0 + 60_000, 44, 0, 7))
    for magic in (0, 1):
        for codec in ["none", "gzip", "snappy", "lz4"]:
            add(build_legacy(magic, records(offset, 3, key=codec != "gzip"), offset, codec))
    add(build_legacy(1, records(offset, 3, size=70_000), offset, "lz4"))
    add(build_legacy(1, records(offset, 2), offset, "snappy", log_append_time=T0 + 70_000))
    add(build_legacy(1, records(offset, 1), offset, "none", log_append_time=T0 + 70_001))

    (out / "batches.log").write_bytes(bytes(log))
    expected = decode_log(log)
    (out / "expected.json").write_text(json.dumps({"batches": expected}, indent=1))
    print(f"wrote {len(expected)} batches, {sum(len(b['records']) for b in expected)} records, "
          f"{len(log)} bytes")


if __name__ == "__main__":
    main()
