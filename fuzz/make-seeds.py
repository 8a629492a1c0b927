#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into fuzz/seeds/<target>/ from the broker-v1
fixtures (real segment files, indexes, checkpoints) plus a few hand-written inputs.
Deterministic: rerun after the fixtures change. Usage: fuzz/make-seeds.py"""
import hashlib
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent
LOG_DIR = ROOT.parent / "tests/fixtures/broker-v1/log-dir"
SEEDS = ROOT / "seeds"


def put(target, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def entries(log):
    pos = 0
    while pos + 12 <= len(log):
        (size,) = struct.unpack(">i", log[pos + 8:pos + 12])
        if size < 14 or pos + 12 + size > len(log):
            return
        yield log[pos:pos + 12 + size]
        pos += 12 + size


def piece(b):
    b = b[:0xFFFF]
    return struct.pack(">H", len(b)) + b


for part in sorted(p for p in LOG_DIR.iterdir() if p.is_dir()):
    for log_path in sorted(part.glob("*.log")):
        log = log_path.read_bytes()
        put("log_bytes", b"\x00" + log)
        for e in entries(log):
            put("log_bytes", b"\x01" + e)
        index = log_path.with_suffix(".index")
        tindex = log_path.with_suffix(".timeindex")
        ib = index.read_bytes() if index.exists() else b""
        tb = tindex.read_bytes() if tindex.exists() else b""
        put("index_entries", ib)
        put("index_entries", tb)
        if len(log) <= 0xFFFF:
            for flags in (0, 1, 2, 3):
                put("segment_files", bytes([flags]) + piece(log) + piece(ib) + tb)
    for name in ("leader-epoch-checkpoint", "partition.metadata"):
        f = part / name
        if f.exists():
            put("text_files", f.read_bytes())
    put("names", part.name.encode())
    for f in sorted(part.iterdir()):
        put("names", f.name.encode())
for f in sorted(p for p in LOG_DIR.iterdir() if p.is_file()):
    put("text_files", f.read_bytes())

# build_batch: [magic selector, codec, attribute bits, records count, body]
record = bytes([0x10, 0x00, 0x00, 0x00, 0x01, 0x02, 0x6b, 0x06, 0x76, 0x61, 0x6c, 0x00])
for sel in range(3):
    for codec in range(5):
        put("build_batch", bytes([sel, codec, 0, 1]) + record)
legacy_inner = struct.pack(">qi", 0, 14) + b"\0\0\0\0" + b"\x00\x00" + struct.pack(">ii", -1, 0)
put("build_batch", bytes([0, 1, 0, 1]) + legacy_inner)

for n in [
    "0", "0..", "5..10", "-10", "-10..", "0.json", "-1.raw", "5..10.json", "9223372036854775807",
    "9223372036854775808", "-18446744073709551616", "10..5", "-5..10", "1.5", "",
    "1767225600000", "2026-01-01", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123+08:00",
    "-90s", "-15m", "-1h", "-2d", "-1", "-2", "-3", "-1h..-5m", "2026-13-45", "-99999999999999999d",
    "00000000000000000000.log", "00000000000000000042.index.deleted", "orders-0",
    "orders-0.abc123-delete", "..", ".", "a" * 260, "bad\x01name",
]:
    put("names", n.encode())

for a in [
    b"hello\nworld\n", b"no newline", b"\n\n\r\n",
    b'{"key":"k","payload":"v"}\n',
    b'{"key":null,"payload":"aGk=","payload_encoding":"base64","headers":["h","v","h2",null]}\n',
    b'{"payload":"v","headers":{"a":"1","b":["2","3"]},"ts":1767225600000}\n',
    b'{"payload":"v","topic":"t","partition":0,"offset":5,"tstype":"create","broker":1}\n',
    b'{"payload":\n', b"[1,2]\n", b"\xff\xfe\n", b'{"bogus":1}\n',
]:
    put("append_input", a)
