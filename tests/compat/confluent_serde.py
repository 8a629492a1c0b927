#!/usr/bin/env python3
"""confluent-kafka's own Schema Registry serializers and deserializers, without a registry server.

    confluent_serde.py produce OUT_DIR
    confluent_serde.py consume LOG_FILE MANIFEST

The independent encoder/decoder of the wire format that tests/broker/broker_confluent_serde.rs
checks topicfs against, in both directions. The registry is confluent-kafka's in-memory
MockSchemaRegistryClient (what `SchemaRegistryClient.new_client` returns for a `mock://` URL;
the class is `confluent_kafka.schema_registry._sync.mock_schema_registry_client` in 2.16.1), so
no server runs; it numbers schemas 1, 2, ... in the order they are registered.

produce: the serializers register their schemas themselves (`auto.register.schemas`, the
default) under the TopicNameStrategy subjects of their SerializationContext (value field):
  - AvroSerializer, topic `x-avro`: an Avro record (nested record, enum, array, map, long,
    double, float, boolean, a null union);
  - ProtobufSerializer, topic `x-protobuf`: `xcheck.Customer` (a nested message type used for a
    field and a repeated field, a oneof, a map, an enum, int64/uint64, bytes, a Timestamp and a
    message imported from `common/geo.proto`, which the serializer registers as the reference
    subject `common/geo.proto`), compiled by protoc (grpc_tools) into Python classes; and
    topic `x-protobuf-nested`: the nested type `xcheck.Customer.Address` alone (message
    indexes [0, 0]; the same file, which the mock registers again under that topic's subject);
  - JSONSerializer, topic `x-json`: a JSON Schema object, each value validated by the serializer.
(One topic per format: a real registry refuses a subject whose versions change type.)
It writes OUT_DIR/log-dir, a broker log dir (tests/fixtures/generate.py's Partition and files,
kafka-python's batch builder): `_schemas-0` with one SCHEMA record per registered schema, keys
and values as tests/fixtures/generate_schemas.py writes them (Jackson's compact JSON), for the
ids the mock assigned; for Protobuf the schema is the `.proto` text (the mock holds what the
Python serializer sends, a base64 FileDescriptorProto; the registry stores such a schema as
`.proto` text). And `x-avro-0`, `x-protobuf-0`, `x-protobuf-nested-0`, `x-json-0` holding
the serialized values.
OUT_DIR/manifest.json: "subjects" (subject, version, id, schemaType, references, schema as in
`_schemas`), "registered" (what the mock holds, to load another mock with the same ids) and
"records": topic, partition, offset, schema_id, message_indexes (Protobuf) and "json", the
expected JSON: the dict the Avro/JSON serializer was given, MessageToJson of the Protobuf
message.

consume: loads a mock with MANIFEST's "registered" schemas (checking it assigns the same ids),
reads LOG_FILE's records with kafka-python's codec (tests/compat/kafka_py.py) and deserializes
each value with AvroDeserializer / ProtobufDeserializer / JSONDeserializer (by the type of the
schema its id names; for Protobuf the generated class the message indexes name). Prints one JSON
line per record: {"offset", "schema_id", "message_indexes", "value", "error"}; value is the
deserializer's dict (Avro, JSON) or MessageToJson (Protobuf); error is null or the exception's
text (a record that does not deserialize is reported, not raised). schema_id and
message_indexes are what confluent's schema id deserializer read from the value. Exits 0.
"""

import argparse
import base64
import importlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "fixtures"))

from confluent_kafka.schema_registry import (  # noqa: E402
    Schema, SchemaReference, SchemaRegistryClient, dual_schema_id_deserializer)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.common.serde import SchemaId  # noqa: E402
from confluent_kafka.schema_registry.json_schema import (  # noqa: E402
    JSONDeserializer, JSONSerializer)
from confluent_kafka.schema_registry.protobuf import (  # noqa: E402
    ProtobufDeserializer, ProtobufSerializer)
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from google.protobuf import descriptor_pb2, json_format  # noqa: E402

import generate_schemas  # noqa: E402
import kafka_py  # noqa: E402
from generate import T0, Partition  # noqa: E402
from kafka_py import build_v2  # noqa: E402

AVRO_TOPIC, PROTOBUF_TOPIC, JSON_TOPIC = "x-avro", "x-protobuf", "x-json"
NESTED_TOPIC = "x-protobuf-nested"

AVRO_SCHEMA = {
    "type": "record", "name": "User", "namespace": "com.example.xcheck",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "active", "type": "boolean"},
        {"name": "score", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "age", "type": "int"},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "street", "type": "string"}, {"name": "number", "type": "int"}]}},
        {"name": "tier", "type": {"type": "enum", "name": "Tier",
                                  "symbols": ["GOLD", "SILVER", "BRONZE"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "nickname", "type": ["null", "string"], "default": None},
    ],
}

AVRO_VALUES = [
    {"id": 1, "name": "alice", "active": True, "score": 12.5, "ratio": 0.25, "age": 31,
     "address": {"street": "Main", "number": 1}, "tier": "GOLD", "tags": ["a", "b"],
     "counts": {"x": 1, "y": -2}, "nickname": None},
    {"id": -(2**63), "name": "caf\u00e9 \u2603 \U0001f600 \"q\" \\", "active": False,
     "score": -1e-300, "ratio": 0.1, "age": -(2**31), "address": {"street": "", "number": 0},
     "tier": "BRONZE", "tags": [], "counts": {}, "nickname": None},
    {"id": 2**63 - 1, "name": "", "active": True, "score": 1.7976931348623157e308,
     "ratio": 3.4028234663852886e38, "age": 2**31 - 1,
     "address": {"street": "Long street", "number": 99}, "tier": "SILVER",
     "tags": ["only"], "counts": {"big": 2**40}, "nickname": None},
]

GEO_PROTO = """syntax = "proto3";
package common;

message Point {
  double lat = 1;
  double lon = 2;
}
"""

CUSTOMER_PROTO = """syntax = "proto3";
package xcheck;

import "google/protobuf/timestamp.proto";
import "common/geo.proto";

message Customer {
  message Address {
    string street = 1;
    int32 number = 2;
    repeated string lines = 3;
    common.Point where = 4;
  }
  enum Tier {
    TIER_UNKNOWN = 0;
    GOLD = 1;
    SILVER = 2;
  }
  string name = 1;
  int64 id = 2;
  Address home = 3;
  repeated Address others = 4;
  oneof contact {
    string email = 5;
    string phone = 6;
  }
  map<string, int32> scores = 7;
  double balance = 8;
  bool active = 9;
  bytes token = 10;
  Tier tier = 11;
  google.protobuf.Timestamp since = 12;
  uint64 big = 13;
  float ratio = 14;
}
"""

PROTO_FILES = {"common/geo.proto": GEO_PROTO, "customer.proto": CUSTOMER_PROTO}

JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Event",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "kind": {"type": "string", "enum": ["click", "view", "buy"]},
        "user": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "props": {"type": "object", "additionalProperties": {"type": "number"}},
        "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    },
    "required": ["id", "kind"],
    "additionalProperties": False,
}

JSON_VALUES = [
    {"id": 1, "kind": "click", "user": "alice", "tags": ["home"], "props": {"x": 1.5},
     "nested": {"ok": True}},
    {"id": 2, "kind": "view", "user": None},
    {"id": 3, "kind": "buy", "user": "caf\u00e9 \u263a", "tags": [],
     "props": {"amount": 19.99, "qty": 2}},
]


def compile_protos(tmp):
    """protoc (grpc_tools) on PROTO_FILES into Python modules; returns {file name: module}."""
    import grpc_tools
    from grpc_tools import protoc

    src, gen = os.path.join(tmp, "src"), os.path.join(tmp, "gen")
    os.makedirs(gen)
    for name, text in PROTO_FILES.items():
        path = os.path.join(src, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).write_text(text)
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["protoc", f"-I{src}", f"-I{wkt}", f"--python_out={gen}", *PROTO_FILES]
    cwd = os.getcwd()
    os.chdir(src)
    try:
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
    finally:
        os.chdir(cwd)
    sys.path.insert(0, gen)
    return {name: importlib.import_module(name[: -len(".proto")].replace("/", ".") + "_pb2")
            for name in PROTO_FILES}


def protobuf_messages(mods):
    from google.protobuf.timestamp_pb2 import Timestamp

    cls = mods["customer.proto"].Customer
    point = mods["common/geo.proto"].Point
    full = cls(name="alice", id=-(2**62), email="a@example.com", balance=-12.75, active=True,
               token=b"\x00\xff\x10", tier=cls.GOLD, since=Timestamp(seconds=1767225600,
                                                                       nanos=250000000),
               big=2**64 - 1, ratio=0.25,
               home=cls.Address(street="Main", number=1, lines=["a", "b"],
                                where=point(lat=52.37, lon=4.89)),
               others=[cls.Address(street="Side"), cls.Address(number=-5)])
    full.scores["x"] = 3
    full.scores["y"] = -1
    return [
        full,
        cls(name="bob", phone="+31 6", tier=cls.SILVER),
        cls(),  # every field default: "{}"
        cls(id=7, home=cls.Address()),  # an empty nested message is still shown: "home": {}
    ]


def mock_client():
    return SchemaRegistryClient.new_client({"url": "mock://xcheck"})


def framed_indexes(data, schema_type):
    """(id, message indexes) as confluent's schema id deserializer reads them from `data`."""
    sid = SchemaId(schema_type)
    dual_schema_id_deserializer(data, None, sid)
    return sid.id, sid.message_indexes


def proto_text(schema_str):
    """The `.proto` text of a schema the Python ProtobufSerializer registered (base64 of a
    FileDescriptorProto), by its file name."""
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema_str))
    return PROTO_FILES[fd.name]


def registered(client):
    """Every schema the mock holds, in id order: subject, version, id, type, schema_str,
    references."""
    out = []
    for subject in client.get_subjects():
        for version in client.get_versions(subject):
            rs = client.get_version(subject, version)
            s = rs.schema
            out.append({"subject": subject, "version": version, "id": rs.schema_id,
                        "schemaType": s.schema_type or "AVRO", "schema_str": s.schema_str,
                        "references": [{"name": r.name, "subject": r.subject,
                                        "version": r.version} for r in s.references or []]})
    out.sort(key=lambda e: e["id"])
    return out


def produce(out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        mods = compile_protos(tmp)
        client = mock_client()
        rows = []  # (topic, record bytes, schema type, expected json)

        ctx = SerializationContext(AVRO_TOPIC, MessageField.VALUE)
        ser = AvroSerializer(client, json.dumps(AVRO_SCHEMA))
        rows += [(AVRO_TOPIC, ser(v, ctx), "AVRO", v) for v in AVRO_VALUES]

        ctx = SerializationContext(PROTOBUF_TOPIC, MessageField.VALUE)
        messages = protobuf_messages(mods)
        ser = ProtobufSerializer(type(messages[0]), client, {"use.deprecated.format": False})
        rows += [(PROTOBUF_TOPIC, ser(m, ctx), "PROTOBUF",
                  json.loads(json_format.MessageToJson(m))) for m in messages]
        # The nested type alone: message indexes [0, 0].
        ctx = SerializationContext(NESTED_TOPIC, MessageField.VALUE)
        address = type(messages[0]).Address
        ser = ProtobufSerializer(address, client, {"use.deprecated.format": False})
        rows += [(NESTED_TOPIC, ser(m, ctx), "PROTOBUF",
                  json.loads(json_format.MessageToJson(m)))
                 for m in [address(street="Nested", number=4, lines=["x"]), address()]]

        ctx = SerializationContext(JSON_TOPIC, MessageField.VALUE)
        ser = JSONSerializer(json.dumps(JSON_SCHEMA), client)
        rows += [(JSON_TOPIC, ser(v, ctx), "JSON", v) for v in JSON_VALUES]

        schemas = registered(client)

    subjects = []
    for e in schemas:
        text = proto_text(e["schema_str"]) if e["schemaType"] == "PROTOBUF" else e["schema_str"]
        subjects.append({**{k: e[k] for k in ("subject", "version", "id", "schemaType",
                                              "references")}, "schema": text})

    clock = iter(range(10**6))
    parts = {}

    def part(topic):
        return parts.setdefault(topic, Partition(topic, 0))

    # _schemas: one batch per write, as the registry's KafkaStore produces each record alone.
    p = part("_schemas")
    store = [({"keytype": "NOOP", "magic": 0}, None)]
    for s in subjects:
        stype = None if s["schemaType"] == "AVRO" else s["schemaType"]
        store.append(({"keytype": "SCHEMA", "subject": s["subject"], "version": s["version"],
                       "magic": 1},
                      generate_schemas.schema_value(s["subject"], s["version"], s["id"], stype,
                                                    s["schema"], s["references"])))
    for key, value in store:
        r = {"timestamp": T0 + 1000 * next(clock),
             "key": generate_schemas.compact(key).encode(),
             "value": None if value is None else generate_schemas.compact(value).encode(),
             "headers": []}
        p.append(build_v2([r], p.next_offset))

    records = []
    for topic, data, stype, want in rows:
        p = part(topic)
        r = {"timestamp": T0 + 1000 * next(clock), "key": None, "value": data, "headers": []}
        offset = p.next_offset
        p.append(build_v2([r], offset))
        sid, indexes = framed_indexes(data, stype)
        records.append({"topic": topic, "partition": 0, "offset": offset, "schemaType": stype,
                        "schema_id": sid, "message_indexes": indexes, "json": want})
    for p in parts.values():
        p.close()
        p.log_start_offset = 0

    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    generate_schemas.write_log_dir(list(parts.values()), out_dir / "log-dir")
    manifest = {"generator": "tests/compat/confluent_serde.py",
                "subjects": subjects, "registered": schemas, "records": records}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def consume(log_file, manifest):
    with tempfile.TemporaryDirectory() as tmp:
        mods = compile_protos(tmp)
        client = mock_client()
        for e in manifest["registered"]:
            refs = [SchemaReference(r["name"], r["subject"], r["version"])
                    for r in e["references"]]
            rs = client.register_schema_full_response(
                e["subject"], Schema(e["schema_str"], e["schemaType"], refs))
            if rs.schema_id != e["id"] or rs.version != e["version"]:
                raise SystemExit(f"the mock gave {e['subject']} v{e['version']} id "
                                 f"{rs.schema_id} v{rs.version}, the manifest says {e['id']}")
        types = {e["id"]: (e["schemaType"], e["subject"]) for e in manifest["registered"]}
        # Generated classes by Confluent's (Python) message indexes: the path through the
        # descriptors' nested types.
        classes = {}
        for module in mods.values():
            def walk(desc, path):
                classes[(module.DESCRIPTOR.name, tuple(path))] = desc
                for i, nested in enumerate(desc.nested_types):
                    walk(nested, path + [i])
            for i, desc in enumerate(module.DESCRIPTOR.message_types_by_name.values()):
                walk(desc, [i])
        from google.protobuf.message_factory import GetMessageClass

        avro = AvroDeserializer(client)
        jsond = JSONDeserializer(None, schema_registry_client=client)
        for batch in kafka_py.decode_log(Path(log_file).read_bytes()):
            if batch["is_control"]:
                continue
            for r in batch["records"]:
                data = kafka_py.unb64(r["value"])
                line = {"offset": r["offset"], "schema_id": None, "message_indexes": None,
                        "value": None, "error": None}
                try:
                    sid, _ = framed_indexes(data, "AVRO")
                    line["schema_id"] = sid
                    stype, subject = types[sid]
                    topic = subject[: -len("-value")] if subject.endswith("-value") else subject
                    ctx = SerializationContext(topic, MessageField.VALUE)
                    if stype == "AVRO":
                        line["value"] = avro(data, ctx)
                    elif stype == "JSON":
                        line["value"] = jsond(data, ctx)
                    else:
                        _, indexes = framed_indexes(data, "PROTOBUF")
                        line["message_indexes"] = indexes
                        schema = client.get_schema(sid)
                        fd = descriptor_pb2.FileDescriptorProto.FromString(
                            base64.b64decode(schema.schema_str))
                        desc = classes[(fd.name, tuple(indexes))]
                        des = ProtobufDeserializer(GetMessageClass(desc),
                                                   {"use.deprecated.format": False}, client)
                        line["value"] = json.loads(json_format.MessageToJson(des(data, ctx)))
                except Exception as e:  # noqa: BLE001 - reported per record, not raised
                    line["error"] = f"{type(e).__name__}: {e}"
                print(json.dumps(line, ensure_ascii=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("produce", help="write a log dir of confluent-serialized values")
    p.add_argument("out", type=Path)
    c = sub.add_parser("consume", help="deserialize a .log file's values")
    c.add_argument("log", type=Path)
    c.add_argument("manifest", type=Path)
    args = ap.parse_args()
    if args.mode == "produce":
        produce(args.out)
    else:
        consume(args.log, json.loads(args.manifest.read_text()))


if __name__ == "__main__":
    main()
