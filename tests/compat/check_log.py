#!/usr/bin/env python3
"""Checks Kafka log files with kafka-python, independently of topicfs.

Used by the Rust integration tests (tests/compat/compat_kafka_python.rs) and by pytest
(tests/compat/test_fixtures.py). Subcommands:

  decode LOG EXPECTED.json
      Decodes every batch of LOG with kafka-python (CRC-checked) and compares it, field by field
      and record by record, with the batches listed in EXPECTED.json ({"batches": [batch, ...]},
      schema in kafka_py.py). Fields absent from an expected batch are not compared.

  partition DIR [--contiguous]
      Checks a partition directory as a broker would leave it: every `.log` decodes (CRCs), file
      names are the 20-digit base offset of their first batch, offsets increase across segments
      (with --contiguous: without gaps, as an append-only log has them), every `.index` entry
      points at a batch start and honours Kafka's lookup invariant, every `.timeindex` entry
      holds the segment's max timestamp so far, `.txnindex` entries are well formed.

  records DIR
      Prints, as one JSON list on stdout, every record of every `.log` in DIR in file order,
      decoded by kafka-python: {offset, timestamp, timestamp_type, key, value, headers,
      is_control} (schema in kafka_py.py).

Exit status 0 when everything matches, 1 with one line per mismatch on stderr otherwise.
"""

import argparse
import json
import re
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_py import DecodeFailure, decode_log  # noqa: E402

SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")


def compare_batches(actual, expected, where):
    """Mismatches between decoded batches and expected ones, as readable lines."""
    problems = []
    if len(actual) != len(expected):
        problems.append(f"{where}: {len(actual)} batches decoded, {len(expected)} expected")
    for i, (a, e) in enumerate(zip(actual, expected)):
        at = f"{where}: batch {i} (position {a['position']})"
        for field, want in e.items():
            if field == "records":
                continue
            if a.get(field) != want:
                problems.append(f"{at}: {field} is {a.get(field)!r}, expected {want!r}")
        if "records" not in e:
            continue
        if len(a["records"]) != len(e["records"]):
            problems.append(f"{at}: {len(a['records'])} records, {len(e['records'])} expected")
        for ar, er in zip(a["records"], e["records"]):
            for field, want in er.items():
                got = ar.get(field)
                if field == "headers":
                    got = [list(h) for h in got]
                if got != want:
                    problems.append(f"{at}: record at offset {ar['offset']}: {field} is "
                                    f"{got!r}, expected {want!r}")
    return problems


def read_entries(path, size, fmt):
    data = path.read_bytes() if path.exists() else b""
    if len(data) % size:
        return None, data
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data), size)], data


def check_segment(path, base, batches):
    """Problems in one segment's index files, given its decoded batches."""
    problems = []
    starts = {b["position"] for b in batches}
    index, raw = read_entries(path.with_suffix(".index"), 8, ">ii")
    if index is None:
        problems.append(f"{path.with_suffix('.index')}: size {len(raw)} is not a multiple of 8")
        index = []
    prev = None
    for rel, pos in index:
        offset = base + rel
        if pos not in starts:
            problems.append(f"{path}: index entry ({offset}, {pos}) is not at a batch start")
        if prev is not None and (offset <= prev[0] or pos < prev[1]):
            problems.append(f"{path}: index entry ({offset}, {pos}) does not increase")
        # Kafka's lookup invariant: every batch holding an offset >= the entry's offset begins
        # at or after the entry's position.
        for b in batches:
            if b["last_offset"] >= offset and b["position"] < pos:
                problems.append(f"{path}: batch at {b['position']} (last offset "
                                f"{b['last_offset']}) lies before index entry ({offset}, {pos})")
        prev = (offset, pos)
    time_index, raw = read_entries(path.with_suffix(".timeindex"), 12, ">qi")
    if time_index is None:
        problems.append(f"{path.with_suffix('.timeindex')}: size {len(raw)} is not a multiple "
                        "of 12")
        time_index = []
    prev = None
    for ts, rel in time_index:
        offset = base + rel
        if prev is not None and (ts <= prev[0] or offset < prev[1]):
            problems.append(f"{path}: time index entry ({ts}, {offset}) does not increase")
        # The entry's timestamp is the max timestamp of the batches up to the one ending at its
        # offset; the offset is where that max first appears (a batch's last offset, or for old
        # brokers a record inside it).
        upto = [b for b in batches if b["base_offset"] <= offset]
        max_ts = max((b["max_timestamp"] for b in upto), default=-1)
        if ts != max_ts:
            problems.append(f"{path}: time index entry ({ts}, {offset}): max timestamp up to "
                            f"that offset is {max_ts}")
        elif not any(b["max_timestamp"] == ts and b["base_offset"] <= offset <= b["last_offset"]
                     for b in batches):
            problems.append(f"{path}: time index entry ({ts}, {offset}) does not point into the "
                            "batch carrying that timestamp")
        prev = (ts, offset)
    txn = path.with_suffix(".txnindex")
    if txn.exists():
        data = txn.read_bytes()
        for i in range(0, len(data) - len(data) % 34, 34):
            version, pid, first, last, lso = struct.unpack_from(">hqqqq", data, i)
            if version != 0 or not first <= last or not any(
                    b["is_control"] and b["base_offset"] == last for b in batches):
                problems.append(f"{txn}: entry {(version, pid, first, last, lso)} does not end "
                                "at a control batch of this segment")
    return problems


def check_partition(directory, contiguous):
    problems = []
    logs = sorted(p for p in directory.iterdir() if p.suffix == ".log")
    if not logs:
        return [f"{directory}: no .log file"]
    next_offset = None
    for log in logs:
        m = SEGMENT_NAME.match(log.name)
        if not m:
            problems.append(f"{log}: not named by a 20-digit base offset")
            continue
        base = int(m.group(1))
        try:
            batches = decode_log(log.read_bytes())
        except DecodeFailure as e:
            problems.append(f"{log}: {e}")
            continue
        if batches and batches[0]["base_offset"] < base:
            problems.append(f"{log}: first batch starts at {batches[0]['base_offset']}, below the "
                            f"segment's base offset {base}")
        if contiguous and batches and batches[0]["base_offset"] != base:
            problems.append(f"{log}: first batch starts at {batches[0]['base_offset']}, "
                            f"not at the base offset {base}")
        for b in batches:
            if next_offset is not None:
                if contiguous and b["base_offset"] != next_offset:
                    problems.append(f"{log}: batch at {b['position']} starts at offset "
                                    f"{b['base_offset']}, expected {next_offset}")
                elif b["base_offset"] < next_offset:
                    problems.append(f"{log}: batch at {b['position']} starts at offset "
                                    f"{b['base_offset']}, below {next_offset}")
            offsets = [r["offset"] for r in b["records"]]
            if offsets != sorted(set(offsets)) or (offsets and (
                    offsets[0] < b["base_offset"] or offsets[-1] > b["last_offset"])):
                problems.append(f"{log}: batch at {b['position']} has record offsets {offsets} "
                                f"outside {b['base_offset']}..{b['last_offset']}")
            if contiguous and b["magic"] == 2 and offsets != list(
                    range(b["base_offset"], b["last_offset"] + 1)):
                problems.append(f"{log}: batch at {b['position']} has record offsets {offsets}")
            next_offset = b["last_offset"] + 1
        problems += check_segment(log, base, batches)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decode")
    d.add_argument("log", type=Path)
    d.add_argument("expected", type=Path)
    p = sub.add_parser("partition")
    p.add_argument("dir", type=Path)
    p.add_argument("--contiguous", action="store_true")
    r = sub.add_parser("records")
    r.add_argument("dir", type=Path)
    args = ap.parse_args()
    if args.command == "records":
        out = []
        for log in sorted(args.dir.glob("*.log")):
            for b in decode_log(log.read_bytes()):
                out += [{**rec, "timestamp_type": b["timestamp_type"],
                         "is_control": b["is_control"]} for rec in b["records"]]
        json.dump(out, sys.stdout)
        return 0
    if args.command == "decode":
        expected = json.loads(args.expected.read_text())["batches"]
        try:
            actual = decode_log(args.log.read_bytes())
        except DecodeFailure as e:
            problems = [f"{args.log}: {e}"]
        else:
            problems = compare_batches(actual, expected, str(args.log))
            records = sum(len(b["records"]) for b in actual)
            print(f"kafka-python {__import__('kafka').__version__} decoded {len(actual)} batches, "
                  f"{records} records from {args.log}")
    else:
        problems = check_partition(args.dir, args.contiguous)
        print(f"checked {args.dir}")
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
