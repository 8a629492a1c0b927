#!/usr/bin/env python3
"""The records of Kafka's ``__consumer_offsets`` topic, written and read from Kafka's published
schemas, independently of topicfs.

Schemas (Apache Kafka, ``group-coordinator/src/main/resources/common/message/``):

* ``OffsetCommitKey.json``: versions 0-1: group (string), topic (string), partition (int32);
* ``GroupMetadataKey.json``: version 2: group (string);
* ``OffsetCommitValue.json``: versions 0-4, flexible from 4: offset (int64), leaderEpoch (int32,
  3+), metadata (string), commitTimestamp (int64), expireTimestamp (int64, version 1 only),
  topicId (uuid, tagged field 0, 4+);
* ``GroupMetadataValue.json``: versions 0-4: protocolType, generation, protocol, leader,
  currentStateTimestamp (2+), members (array).

Each key and value starts with its int16 version; integers are big-endian, strings an int16
length then UTF-8 (flexible versions: compact strings, unsigned varint length + 1, and a tagged
field section). A record with a null value is a tombstone. The partition of a group is
``Utils.abs(groupId.hashCode()) % partitionCount`` (Java's String.hashCode over UTF-16 units).

    python consumer_offsets.py LOG_DIR

prints, as JSON, the latest offset commit of every key found in ``LOG_DIR/__consumer_offsets-*``
(tombstones applied, group metadata and control batches skipped), each with the partition
directory it was found in and the one Kafka's partition choice names.
"""

import base64
import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_py import decode_log  # noqa: E402

TOPIC = "__consumer_offsets"


def java_hash(s):
    h = 0
    raw = s.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group, partitions):
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# ---- encoding (what the fixture generator writes) ----

def _str16(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _uvarint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def offset_key(group, topic, partition, version=1):
    return struct.pack(">h", version) + _str16(group) + _str16(topic) + struct.pack(">i", partition)


def group_key(group):
    return struct.pack(">h", 2) + _str16(group)


def offset_value(version, offset, metadata="", commit_ts=0, *, leader_epoch=-1, expire_ts=-1,
                 topic_id=None):
    out = struct.pack(">hq", version, offset)
    if version >= 3:
        out += struct.pack(">i", leader_epoch)
    if version >= 4:
        b = metadata.encode()
        out += _uvarint(len(b) + 1) + b
    else:
        out += _str16(metadata)
    out += struct.pack(">q", commit_ts)
    if version == 1:
        out += struct.pack(">q", expire_ts)
    if version >= 4:
        tagged = [] if topic_id is None else [(0, topic_id)]
        out += _uvarint(len(tagged))
        for tag, data in tagged:
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return out


def group_metadata_value(protocol_type, generation, protocol, leader, state_ts):
    """GroupMetadataValue version 3 of a group without members (state Empty)."""
    return (struct.pack(">h", 3) + _str16(protocol_type) + struct.pack(">i", generation)
            + _str16(protocol) + _str16(leader) + struct.pack(">q", state_ts)
            + struct.pack(">i", 0))


# ---- decoding ----

class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"truncated at {self.pos}: need {n}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        n = self.unpack(">h")
        return "" if n == -1 else self.take(n).decode()

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint()
        return "" if n == 0 else self.take(n - 1).decode()


def decode_key(data):
    r = Reader(data)
    version = r.unpack(">h")
    if version in (0, 1):
        return {"kind": "offset", "version": version, "group": r.string(), "topic": r.string(),
                "partition": r.unpack(">i")}
    if version == 2:
        return {"kind": "group", "version": version, "group": r.string()}
    return {"kind": "other", "version": version}


def decode_value(data):
    r = Reader(data)
    version = r.unpack(">h")
    if not 0 <= version <= 4:
        raise ValueError(f"unknown offset commit value version {version}")
    value = {"version": version, "offset": r.unpack(">q"), "leader_epoch": -1}
    if version >= 3:
        value["leader_epoch"] = r.unpack(">i")
    value["metadata"] = r.compact_string() if version >= 4 else r.string()
    value["commit_timestamp"] = r.unpack(">q")
    if version == 1:
        value["expire_timestamp"] = r.unpack(">q")
    if version >= 4:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.take(r.uvarint())
    if r.pos != len(data):
        raise ValueError(f"{len(data) - r.pos} bytes after the value")
    return value


def read_log_dir(log_dir):
    log_dir = Path(log_dir)
    dirs = sorted((d for d in log_dir.glob(TOPIC + "-*") if d.is_dir()),
                  key=lambda d: int(d.name.rsplit("-", 1)[1]))
    count = len(dirs)
    state = {}

    def apply(d, rec):
        key = decode_key(base64.b64decode(rec["key"]))
        if key["kind"] != "offset":
            return
        k = (key["group"], key["topic"], key["partition"])
        if rec["value"] is None:
            state.pop(k, None)
            return
        value = decode_value(base64.b64decode(rec["value"]))
        state[k] = {"group": k[0], "topic": k[1], "partition": k[2],
                    "key_version": key["version"], **value,
                    "dir": d.name, "record_offset": rec["offset"],
                    "expected_dir": f"{TOPIC}-{partition_for(k[0], count)}"}

    for d in dirs:
        pending = {}  # producer id -> records of its open transaction
        for log in sorted(d.glob("*.log")):
            for batch in decode_log(log.read_bytes()):
                pid = batch["producer_id"]
                if batch["is_control"]:
                    # Control record key: version, type (0 abort, 1 commit).
                    marker = struct.unpack(">hh", base64.b64decode(
                        batch["records"][0]["key"]))[1]
                    for rec in pending.pop(pid, []):
                        if marker == 1:
                            apply(d, rec)
                elif batch["is_transactional"]:
                    pending.setdefault(pid, []).extend(batch["records"])
                else:
                    for rec in batch["records"]:
                        apply(d, rec)
    return {"partition_count": count, "commits": [state[k] for k in sorted(state)]}


if __name__ == "__main__":
    json.dump(read_log_dir(sys.argv[1]), sys.stdout, indent=1)
    print()
