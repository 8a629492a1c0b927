"""Kafka record batches built and read with kafka-python's record codec.

kafka-python is an implementation of Kafka's record formats written independently of topicfs;
topicfs's byte compatibility is checked against it in both directions:

* ``build_v2`` / ``build_legacy`` make batches with kafka-python's own builders
  (``DefaultRecordBatchBuilder``, ``LegacyRecordBatchBuilder``), then apply the few edits a broker
  makes when it appends a producer's batch (base offset, partition leader epoch, LogAppendTime,
  control flag, retained last offset after compaction), recomputing the CRC the way the broker does;
* ``decode_log`` reads a ``.log`` file's bytes with ``MemoryRecords`` and returns every batch and
  record as plain JSON-ready dicts, in the manifest schema shared with the Rust tests:

  batch  = {position, size, base_offset, last_offset, magic, crc, compression, timestamp_type,
            is_transactional, is_control, producer_id, producer_epoch, base_sequence,
            partition_leader_epoch, max_timestamp, records_count, records: [record]}
  record = {offset, timestamp, key, value, headers: [[name, value]]}

  with key, value and header values as base64 strings or null.
"""

import base64
import functools
import gzip
import struct
import types
import zlib

import crc32c
import kafka
import kafka.codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

# Java's GZIPOutputStream writes MTIME 0; Python's gzip writes the current time. Pin it so the
# corpus is reproducible byte for byte (kafka.codec.gzip_encode looks up gzip.GzipFile at call time).
kafka.codec.gzip = types.SimpleNamespace(GzipFile=functools.partial(gzip.GzipFile, mtime=0))

KAFKA_PYTHON_VERSION = kafka.__version__

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODEC_NAMES = {v: k for k, v in CODECS.items()}

# v2 header field positions (DefaultRecordBatch.java).
V2_BASE_OFFSET = 0
V2_PARTITION_LEADER_EPOCH = 12
V2_CRC = 17
V2_ATTRIBUTES = 21
V2_LAST_OFFSET_DELTA = 23
V2_BASE_TIMESTAMP = 27
V2_MAX_TIMESTAMP = 35
V2_HEADER_SIZE = 61
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

# Legacy message field positions (LegacyRecord.java).
LEGACY_CRC = 12
LEGACY_MAGIC = 16
LEGACY_ATTRIBUTES = 17
LEGACY_TIMESTAMP = 18

BIG = 1 << 30  # builder batch_size: never split, the caller decides what goes in one batch


def b64(data):
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def unb64(text):
    return None if text is None else base64.b64decode(text)


def _v2_recompute_crc(buf):
    struct.pack_into(">I", buf, V2_CRC, crc32c.crc32c(bytes(buf[V2_ATTRIBUTES:])))


def build_v2(records, base_offset, codec="none", *, leader_epoch=0, log_append_time=None,
             producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False,
             control=False, offset_deltas=None, last_offset_delta=None):
    """One v2 batch holding ``records`` (dicts with timestamp, key, value, headers).

    ``offset_deltas`` gives each record's offset delta (default 0..n-1; compacted batches have
    gaps) and ``last_offset_delta`` overrides the header's lastOffsetDelta (the log cleaner keeps
    the original batch's last offset). ``log_append_time`` turns the batch into a LogAppendTime
    batch stamped by the broker. Returns a bytearray.
    """
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=BIG)
    deltas = offset_deltas if offset_deltas is not None else range(len(records))
    for delta, r in zip(deltas, records, strict=True):
        headers = [(k, v) for k, v in r.get("headers", [])]
        if builder.append(delta, r["timestamp"], r["key"], r["value"], headers) is None:
            raise RuntimeError("kafka-python refused a record")
    buf = builder.build()
    if codec != "none" and buf[V2_ATTRIBUTES + 1] & 0x07 != CODECS[codec]:
        # kafka-python silently sends uncompressed data when compression does not shrink it.
        raise RuntimeError(f"{codec} batch came out uncompressed: make the values compressible")
    struct.pack_into(">q", buf, V2_BASE_OFFSET, base_offset)
    struct.pack_into(">i", buf, V2_PARTITION_LEADER_EPOCH, leader_epoch)
    attributes = struct.unpack_from(">h", buf, V2_ATTRIBUTES)[0]
    if log_append_time is not None:
        attributes |= ATTR_TIMESTAMP_TYPE
        struct.pack_into(">q", buf, V2_MAX_TIMESTAMP, log_append_time)
    if control:
        attributes |= ATTR_CONTROL
    struct.pack_into(">h", buf, V2_ATTRIBUTES, attributes)
    if last_offset_delta is not None:
        struct.pack_into(">i", buf, V2_LAST_OFFSET_DELTA, last_offset_delta)
    _v2_recompute_crc(buf)
    return buf


def build_control(marker, base_offset, timestamp, producer_id, producer_epoch,
                  coordinator_epoch=0, leader_epoch=0):
    """An end-transaction marker batch as a transaction coordinator has the broker write it
    (``MemoryRecords.withEndTransactionMarker``): transactional + control, baseSequence -1."""
    control_type = {"abort": 0, "commit": 1}[marker]
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    buf = build_v2([{"timestamp": timestamp, "key": key, "value": value}], base_offset,
                   leader_epoch=leader_epoch, producer_id=producer_id,
                   producer_epoch=producer_epoch, base_sequence=-1, transactional=True,
                   control=True)
    return buf


def build_empty_v2(base_offset, last_offset_delta, timestamp, producer_id, producer_epoch,
                   base_sequence, leader_epoch=0):
    """A v2 batch with no records, as the log cleaner keeps one to preserve a producer's last
    sequence (``BatchRetention.RETAIN_EMPTY``)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=BIG)
    buf = builder.build()
    struct.pack_into(">q", buf, V2_BASE_OFFSET, base_offset)
    struct.pack_into(">i", buf, V2_PARTITION_LEADER_EPOCH, leader_epoch)
    struct.pack_into(">i", buf, V2_LAST_OFFSET_DELTA, last_offset_delta)
    struct.pack_into(">q", buf, V2_BASE_TIMESTAMP, timestamp)
    struct.pack_into(">q", buf, V2_MAX_TIMESTAMP, timestamp)
    _v2_recompute_crc(buf)
    return buf


def _legacy_recompute_crc(buf):
    struct.pack_into(">I", buf, LEGACY_CRC, zlib.crc32(bytes(buf[LEGACY_MAGIC:])) & 0xFFFFFFFF)


def build_legacy(magic, records, base_offset, codec="none", *, log_append_time=None):
    """Legacy v0/v1 entries as a broker stores them.

    Uncompressed: one message per record, absolute offsets. Compressed: one wrapper message whose
    offset is the last inner offset; inner offsets are absolute for v0 and relative (0..n-1) for
    v1, and a v1 wrapper carries the max inner timestamp (CreateTime) or ``log_append_time`` with
    attribute bit 3 (LogAppendTime). Returns a bytearray.
    """
    if codec == "none":
        out = bytearray()
        for i, r in enumerate(records):
            builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=BIG)
            builder.append(base_offset + i, r["timestamp"], r["key"], r["value"])
            msg = builder.build()
            if magic == 1 and log_append_time is not None:
                msg[LEGACY_ATTRIBUTES] |= ATTR_TIMESTAMP_TYPE
                struct.pack_into(">q", msg, LEGACY_TIMESTAMP, log_append_time)
                _legacy_recompute_crc(msg)
            out += msg
        return out
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec],
                                       batch_size=BIG)
    for i, r in enumerate(records):
        inner_offset = base_offset + i if magic == 0 else i
        builder.append(inner_offset, r["timestamp"], r["key"], r["value"])
    wrapper = builder.build()
    struct.pack_into(">q", wrapper, 0, base_offset + len(records) - 1)
    if magic == 1:
        if log_append_time is not None:
            wrapper[LEGACY_ATTRIBUTES] |= ATTR_TIMESTAMP_TYPE
            struct.pack_into(">q", wrapper, LEGACY_TIMESTAMP, log_append_time)
        else:
            struct.pack_into(">q", wrapper, LEGACY_TIMESTAMP,
                             max(r["timestamp"] for r in records))
        _legacy_recompute_crc(wrapper)
    return wrapper


def _timestamp_type_name(batch):
    t = batch.timestamp_type
    return {None: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[t]


def _record_dict(rec):
    return {
        "offset": rec.offset,
        "timestamp": -1 if rec.timestamp is None else rec.timestamp,
        "key": b64(rec.key),
        "value": b64(rec.value),
        "headers": [[k, b64(v)] for k, v in rec.headers],
    }


class DecodeFailure(Exception):
    pass


def decode_log(data):
    """Every batch in ``data`` (a ``.log`` file's bytes), decoded and CRC-checked by kafka-python.

    Raises DecodeFailure on a CRC mismatch or on trailing bytes that are not a whole batch.
    """
    batches = []
    position = 0
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        size = batch.size_in_bytes
        if not batch.validate_crc():
            raise DecodeFailure(f"CRC mismatch in the batch at position {position}")
        if isinstance(batch, DefaultRecordBatch):
            recs = [_record_dict(r) for r in batch]
            entry = {
                "position": position,
                "size": size,
                "base_offset": batch.base_offset,
                "last_offset": batch.last_offset,
                "magic": 2,
                "crc": batch.crc,
                "compression": CODEC_NAMES[batch.compression_type],
                "timestamp_type": _timestamp_type_name(batch),
                "is_transactional": batch.is_transactional,
                "is_control": batch.is_control_batch,
                "producer_id": batch.producer_id,
                "producer_epoch": batch.producer_epoch,
                "base_sequence": batch.base_sequence,
                "partition_leader_epoch": batch.leader_epoch,
                "base_timestamp": batch.first_timestamp,
                "max_timestamp": batch.max_timestamp,
                "records_count": batch.records_count,
                "records": recs,
            }
        else:
            assert isinstance(batch, LegacyRecordBatch)
            inner = list(batch)
            for r in inner:
                if not r.validate_crc():
                    raise DecodeFailure(
                        f"CRC mismatch in the message at offset {r.offset}, wrapper at {position}")
            recs = [_record_dict(r) for r in inner]
            entry = {
                "position": position,
                "size": size,
                "base_offset": recs[0]["offset"],
                "last_offset": batch.base_offset,  # the entry's own offset field
                "magic": batch.magic,
                "crc": batch._crc,  # noqa: SLF001 (kafka-python exposes no accessor)
                "compression": CODEC_NAMES[batch.compression_type],
                "timestamp_type": _timestamp_type_name(batch),
                "is_transactional": False,
                "is_control": False,
                "producer_id": -1,
                "producer_epoch": -1,
                "base_sequence": -1,
                "partition_leader_epoch": -1,
                "base_timestamp": -1 if batch._timestamp is None else batch._timestamp,  # noqa: SLF001
                "max_timestamp": -1 if batch._timestamp is None else batch._timestamp,  # noqa: SLF001
                "records_count": len(recs),
                "records": recs,
            }
        batches.append(entry)
        position += size
    if position != len(data):
        raise DecodeFailure(f"{len(data) - position} bytes after the last whole batch at "
                            f"position {position}")
    return batches
