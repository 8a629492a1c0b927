#!/usr/bin/env python3
"""Decodes the schema-framed values of a `.log` file with the reference libraries.

    schema_check.py LOG_FILE MANIFEST [--key]

LOG_FILE is a Kafka segment (read with kafka-python's codec, tests/compat/kafka_py.py); MANIFEST
is a manifest with a "subjects" list of {subject, version, id, schemaType, references, schema}
(tests/fixtures/schemas-v1/manifest.json). Each record's value (its key with --key) is read as
Confluent's wire format: byte 0, a 4-byte big-endian schema id, for Protobuf the message
indexes (zigzag varints, a lone 0 for [0]), then the body, and decoded by the schema with that
id:

- AVRO: fastavro.schemaless_reader (references parsed first as named types), printed in the
  Avro JSON encoding fastavro.json_writer gives (unions as {"<branch>": value}, bytes and fixed
  as ISO-8859-1 strings, logical types as their underlying type);
- PROTOBUF: the .proto texts compiled by protoc (grpc_tools), the message the indexes name
  parsed by the protobuf package and printed by json_format.MessageToJson (lowerCamelCase
  names, fields with default values omitted);
- JSON: the body parsed as JSON.

Prints one JSON line per record, in offset order:
{"offset": N, "schema_id": ID or null, "value": the decoded JSON or null, "error": null or a
kind}: "unknown id" (no schema with that id), "truncated" (fewer than 5 bytes, or a body that
ends early), "magic byte" (a binary value whose first byte is not 0), "not framed" (a
printable UTF-8 text value), "trailing bytes", "invalid" (the body does not decode). A null
value (tombstone) gives schema_id, value and error null. Exits 0.
"""

import argparse
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fastavro  # noqa: E402
from google.protobuf import (  # noqa: E402
    descriptor_pb2, descriptor_pool, json_format, message_factory)

import kafka_py  # noqa: E402
from proto_fixtures import read_zigzag  # noqa: E402


class Schemas:
    """The manifest's subjects, by id and by (subject, version), with decoders built lazily."""

    def __init__(self, subjects):
        self.by_version = {(s["subject"], s["version"]): s for s in subjects}
        self.by_id = {}
        for s in subjects:
            self.by_id.setdefault(s["id"], s)
        self.decoders = {}

    def decoder(self, sid):
        if sid not in self.decoders:
            entry = self.by_id[sid]
            kind = entry.get("schemaType") or "AVRO"
            self.decoders[sid] = {"AVRO": self.avro, "PROTOBUF": self.protobuf,
                                  "JSON": self.json}[kind](entry)
        return self.decoders[sid]

    def references(self, entry):
        return [(r["name"], self.by_version[(r["subject"], r["version"])])
                for r in entry.get("references", [])]

    def avro(self, entry):
        named = {}

        def parse(e):
            for _, ref in self.references(e):
                parse(ref)
            return fastavro.parse_schema(json.loads(e["schema"]), named_schemas=named)

        schema = parse(entry)

        def decode(body):
            stream = io.BytesIO(body)
            datum = fastavro.schemaless_reader(stream, schema, return_record_name=True)
            if stream.tell() != len(body):
                raise TrailingBytes
            text = io.StringIO()
            fastavro.json_writer(text, schema, [datum])
            return json.loads(text.getvalue())

        return decode

    def protobuf(self, entry):
        import grpc_tools

        with tempfile.TemporaryDirectory() as tmp:
            top = f"schema-{entry['id']}.proto"
            files = {top: entry["schema"]}
            stack = [entry]
            while stack:
                for name, ref in self.references(stack.pop()):
                    if name not in files:
                        files[name] = ref["schema"]
                        stack.append(ref)
            for name, text in files.items():
                path = Path(tmp, "src", name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            out = Path(tmp, "set.pb")
            wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
            subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}/src",
                            f"-I{wkt}", "--include_imports", f"--descriptor_set_out={out}", top],
                           check=True, cwd=tmp)
            fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
        pool = descriptor_pool.DescriptorPool()
        for f in fds.file:
            pool.Add(f)
        (file_proto,) = [f for f in fds.file if f.name == top]
        prefix = f"{file_proto.package}." if file_proto.package else ""

        def declared(messages):
            return [m for m in messages if not m.options.map_entry]

        def decode(body):
            count, pos = read_zigzag(body, 0)
            indexes = [0] if count == 0 else []
            for _ in range(count):
                index, pos = read_zigzag(body, pos)
                indexes.append(index)
            messages, name = declared(file_proto.message_type), prefix
            for index in indexes:
                m = messages[index]
                name += m.name
                messages = declared(m.nested_type)
                name += "."
            cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(name[:-1]))
            message = cls.FromString(body[pos:])
            return json.loads(json_format.MessageToJson(message,
                                                         preserving_proto_field_name=False))

        return decode

    def json(self, entry):
        return lambda body: json.loads(body.decode("utf-8"))


class TrailingBytes(Exception):
    pass


def is_text(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\t\n\r" for c in text)


def decode(schemas, data):
    """(schema id, decoded JSON, error kind) of one key or value."""
    if data is None:
        return None, None, None
    if data[:1] != b"\x00":
        return None, None, ("not framed" if data and is_text(data) else "magic byte")
    if len(data) < 5:
        return None, None, "truncated"
    (sid,) = struct.unpack(">I", data[1:5])
    if sid not in schemas.by_id:
        return sid, None, "unknown id"
    try:
        return sid, schemas.decoder(sid)(data[5:]), None
    except TrailingBytes:
        return sid, None, "trailing bytes"
    except (EOFError, IndexError, struct.error):
        return sid, None, "truncated"
    except Exception:  # noqa: BLE001 - any other decode failure is reported, not raised
        return sid, None, "invalid"


def check(log_path, manifest, key=False):
    schemas = Schemas(manifest["subjects"])
    out = []
    for batch in kafka_py.decode_log(Path(log_path).read_bytes()):
        if batch["is_control"]:
            continue
        for r in batch["records"]:
            data = kafka_py.unb64(r["key"] if key else r["value"])
            sid, value, error = decode(schemas, data)
            out.append({"offset": r["offset"], "schema_id": sid, "value": value, "error": error})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="a .log segment file")
    ap.add_argument("manifest", type=Path, help="a manifest with a subjects list")
    ap.add_argument("--key", action="store_true", help="decode the keys instead of the values")
    args = ap.parse_args()
    manifest = json.loads(args.manifest.read_text())
    for line in check(args.log, manifest, args.key):
        print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()
