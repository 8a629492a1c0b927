#!/usr/bin/env python3
"""Protobuf values in the Confluent wire format, written and read by Google's protobuf package.

The independent encoder the Rust crate topicfs-schema (crates/schema/src/protobuf.rs) is
checked against (crates/schema/tests/protobuf_compat.rs). The .proto texts below are compiled
with protoc (bundled in grpcio-tools) into Python classes in a temporary directory.

    proto_fixtures.py generate OUT.json
        Builds messages with the generated classes (constructors and attributes, not JSON),
        serializes them, and writes a manifest: the schemas (text and references), and for
        each case its schema, message type, the hex of what follows magic + schema id (message
        indexes, then the message) and json_format.MessageToJson's JSON of it.
    proto_fixtures.py parse BODIES.json
        BODIES.json is a list of {"schema": NAME, "hex": HEX} (what follows magic + id); prints
        a JSON list of {"message": FULL NAME, "json": MessageToJson of the message}.

Message indexes are written as Confluent's Java serializer (the schema registry's
MessageIndexes/ProtobufSchema.toMessageIndexes) writes them: a zigzag varint count, then
zigzag varint indexes, the path of the type among the *declared* messages of the file (map
fields' entry types are not counted: the Java side walks the parsed text, where a map field
declares no message); [0] is written as the single byte 0. (confluent-kafka-python counts
descriptor nested_types, map entries included, so it differs for shop.Order.Audit below.)

JSON: MessageToJson(preserving_proto_field_name=False), fields with default values omitted,
as kafka-protobuf-console-consumer's JsonFormat.printer() prints.
"""

import importlib
import json
import os
import sys
import tempfile

# (import name, text, references by import name). The well-known types resolve without one.
SCHEMAS = [
    (
        "common/money.proto",
        """syntax = "proto3";
package common;

message Money {
  string currency = 1;
  int64 units = 2;
  sint32 nanos = 3;
}
""",
        [],
    ),
    (
        "shop.proto",
        """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";
import "common/money.proto";

enum Status {
  STATUS_UNKNOWN = 0;
  PLACED = 1;
  SHIPPED = 2;
}

message Order {
  string order_id = 1;
  int64 total_cents = 2;
  uint64 big = 3;
  bytes blob = 4;
  Status status = 5;
  repeated Item items = 6;
  map<string, int32> counts = 7;
  map<int64, Item> by_number = 8;
  oneof payment {
    string card = 9;
    common.Money cash = 10;
    bool free = 11;
  }
  google.protobuf.Timestamp placed_at = 12;
  optional int32 maybe = 13;
  repeated int64 ids = 14;
  string display_name = 15 [json_name = "label"];
  sint64 delta = 16;
  int32 small = 17;

  message Item {
    string sku = 1;
    uint32 quantity = 2;
    double price = 3;
    float weight = 4;
    repeated string tags = 5;
  }
  // Declared after two map fields: index [0, 1] (their entry types are not counted).
  message Audit {
    string who = 1;
    fixed64 seq = 2;
    sfixed32 change = 3;
    repeated Status history = 4;
  }
}

message Shipment {
  string id = 1;
  message Leg {
    string from_city = 1;
    string to_city = 2;
    message Stop {
      string name = 1;
      google.protobuf.Timestamp eta = 2;
    }
    repeated Stop stops = 3;
  }
  repeated Leg legs = 2;
}
""",
        ["common/money.proto"],
    ),
    (
        "wkt.proto",
        """syntax = "proto3";
package wkt;

import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/field_mask.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";

message Everything {
  google.protobuf.Duration took = 1;
  google.protobuf.Int64Value count = 2;
  google.protobuf.StringValue label = 3;
  google.protobuf.BoolValue flag = 4;
  google.protobuf.FloatValue ratio = 5;
  google.protobuf.BytesValue raw = 6;
  google.protobuf.Struct attrs = 7;
  google.protobuf.Value loose = 8;
  google.protobuf.ListValue list = 9;
  google.protobuf.Any packed = 10;
  google.protobuf.Empty nothing = 11;
  google.protobuf.FieldMask mask = 12;
  double d = 13;
  repeated double ds = 14;
  repeated float fs = 15;
  message Inner {
    int32 x = 1;
  }
}
""",
        [],
    ),
]


def compile_schemas(out):
    """Writes the .proto files into a temp dir, runs protoc, and returns {name: module}."""
    from grpc_tools import protoc
    import grpc_tools

    src = os.path.join(out, "src")
    gen = os.path.join(out, "gen")
    os.makedirs(gen)
    for name, text, _ in SCHEMAS:
        path = os.path.join(src, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["protoc", f"-I{src}", f"-I{wkt}", f"--python_out={gen}"]
    args += [name for name, _, _ in SCHEMAS]
    cwd = os.getcwd()
    os.chdir(src)
    try:
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
    finally:
        os.chdir(cwd)
    sys.path.insert(0, gen)
    modules = {}
    for name, _, _ in SCHEMAS:
        module = name[: -len(".proto")].replace("/", ".") + "_pb2"
        modules[name] = importlib.import_module(module)
    return modules


def declared(messages):
    """The declared messages among descriptors (map entry types left out)."""
    return [m for m in messages if not m.GetOptions().map_entry]


def indexes_of(desc):
    """Confluent's (Java) message indexes of a message descriptor."""
    path = []
    while desc.containing_type is not None:
        parent = desc.containing_type
        path.append(declared(parent.nested_types).index(desc))
        desc = parent
    path.append(declared(desc.file.message_types_by_name.values()).index(desc))
    return list(reversed(path))


def zigzag(value, out):
    raw = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def read_zigzag(buf, pos):
    raw, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 28:
            raise ValueError("varint over 5 bytes")


def frame(message):
    """What follows magic + schema id: the message indexes, then the message."""
    indexes = indexes_of(message.DESCRIPTOR)
    out = bytearray()
    if indexes == [0]:
        out.append(0)
    else:
        zigzag(len(indexes), out)
        for index in indexes:
            zigzag(index, out)
    return bytes(out) + message.SerializeToString()


def to_json(message):
    from google.protobuf import json_format

    return json.loads(json_format.MessageToJson(message, preserving_proto_field_name=False))


def cases(mods):
    """(case name, schema, message) built with the generated classes."""
    from google.protobuf.timestamp_pb2 import Timestamp

    shop = mods["shop.proto"]
    money = mods["common/money.proto"]
    Order, Item, Audit = shop.Order, shop.Order.Item, shop.Order.Audit
    Leg, Stop = shop.Shipment.Leg, shop.Shipment.Leg.Stop

    full = Order(
        order_id="o-1",
        total_cents=-9007199254740993,
        big=18446744073709551615,
        blob=b"\x00\xffbinary\n",
        status=shop.SHIPPED,
        items=[
            Item(sku="a", quantity=2, price=0.1 + 0.2, weight=1.1, tags=["x", "y"]),
            Item(),
            Item(sku="é☃", price=-1e300, weight=3.4028234663852886e38),
        ],
        placed_at=Timestamp(seconds=1709208000, nanos=500000000),
        maybe=0,
        ids=[1, -1, 2**63 - 1, -(2**63)],
        display_name="Alice",
        delta=-5,
        small=-2147483648,
    )
    full.counts["a"] = 1
    full.counts["b"] = -7
    full.by_number[42].sku = "answer"
    full.by_number[-1].quantity = 4294967295
    full.cash.CopyFrom(money.Money(currency="EUR", units=12, nanos=-500000000))
    yield "order_full", "shop.proto", full

    yield "order_empty", "shop.proto", Order()
    yield "order_oneof_default_bool", "shop.proto", Order(free=False)
    yield "order_oneof_card", "shop.proto", Order(card="4111", status=7)
    yield "order_timestamp_nanos", "shop.proto", Order(
        placed_at=Timestamp(seconds=-62135596800, nanos=123456789)
    )
    yield "item_nested", "shop.proto", Item(sku="s", quantity=1, weight=0.5)
    yield "audit_after_maps", "shop.proto", Audit(
        who="bob", seq=2**64 - 1, change=-3, history=[shop.PLACED, shop.SHIPPED, 0]
    )
    yield "shipment", "shop.proto", shop.Shipment(
        id="s-1",
        legs=[Leg(from_city="Ams", to_city="Rtm", stops=[Stop(name="Ldn")]), Leg()],
    )
    yield "stop_deep", "shop.proto", Stop(name="Utr", eta=Timestamp(seconds=1, nanos=1000))
    yield "money_own_schema", "common/money.proto", money.Money(currency="USD", units=-1)

    wkt = mods["wkt.proto"]
    from google.protobuf import wrappers_pb2
    from google.protobuf.duration_pb2 import Duration

    every = wkt.Everything(
        took=Duration(seconds=1, nanos=500000000),
        count=wrappers_pb2.Int64Value(value=-(2**62)),
        label=wrappers_pb2.StringValue(value=""),
        flag=wrappers_pb2.BoolValue(value=False),
        ratio=wrappers_pb2.FloatValue(value=0.1),
        raw=wrappers_pb2.BytesValue(value=b"\x01\x02"),
        # Not -0.0: prost-reflect takes it for the default 0 and drops it (SEMANTICS.md says so).
        d=-2.5e-10,
        ds=[float("nan"), float("inf"), float("-inf"), 5e-324, 1.7976931348623157e308],
        fs=[float("nan"), 3.4028234663852886e38, -1.401298464324817e-45, 16777217.0],
    )
    every.attrs.update({"a": 1, "b": [True, None, "x"], "c": {"d": 2.5}})
    every.loose.string_value = "loose"
    every.list.extend([1, "two", None])
    every.packed.Pack(wkt.Everything.Inner(x=5))
    every.nothing.SetInParent()
    every.mask.paths.extend(["took", "attrs.a"])
    yield "well_known_types", "wkt.proto", every
    negative = wkt.Everything(took=Duration(seconds=-3, nanos=-1000))
    negative.loose.struct_value.update({"k": [1, 2]})
    yield "duration_negative", "wkt.proto", negative


def generate(out_path):
    with tempfile.TemporaryDirectory() as tmp:
        mods = compile_schemas(tmp)
        texts = {name: text for name, text, _ in SCHEMAS}
        manifest = {
            "schemas": [
                {"name": name, "text": text, "imports": [[r, texts[r]] for r in refs]}
                for name, text, refs in SCHEMAS
            ],
            "cases": [
                {
                    "name": case,
                    "schema": schema,
                    "message": message.DESCRIPTOR.full_name,
                    "indexes": indexes_of(message.DESCRIPTOR),
                    "hex": frame(message).hex(),
                    "json": to_json(message),
                }
                for case, schema, message in cases(mods)
            ],
        }
    with open(out_path, "w") as f:
        json.dump(manifest, f, indent=1)


def parse(bodies_path):
    from google.protobuf import message_factory

    with open(bodies_path) as f:
        bodies = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        mods = compile_schemas(tmp)
        results = []
        for body in bodies:
            buf = bytes.fromhex(body["hex"])
            count, pos = read_zigzag(buf, 0)
            if count == 0:
                indexes = [0]
            else:
                indexes = []
                for _ in range(count):
                    index, pos = read_zigzag(buf, pos)
                    indexes.append(index)
            file = mods[body["schema"]].DESCRIPTOR
            desc = declared(file.message_types_by_name.values())[indexes[0]]
            for index in indexes[1:]:
                desc = declared(desc.nested_types)[index]
            message = message_factory.GetMessageClass(desc)()
            message.ParseFromString(buf[pos:])
            results.append({"message": desc.full_name, "json": to_json(message)})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("generate", "parse"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "generate":
        generate(sys.argv[2])
    else:
        parse(sys.argv[2])
