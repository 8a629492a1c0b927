#!/usr/bin/env python3
"""Avro values written by fastavro, an encoder independent of ours, for crates/schema's tests.

    schema_fixtures.py write OUT_DIR     writes OUT_DIR/manifest.json
    schema_fixtures.py check OUT_DIR     reads OUT_DIR/ours.json, decodes our bodies with fastavro

`write`: for every case (a schema, the schemas it references, records) each record is written
with `fastavro.schemaless_writer` (the Avro binary body of a Confluent-framed value) and with
`fastavro.json_writer` (the Avro JSON encoding: unions as {"<branch>": value}, bytes and fixed
as ISO-8859-1 strings). manifest.json:

    {"cases": [{"name", "schema": TEXT, "references": [TEXT...],
                "records": [{"body": HEX, "json": LINE}]}]}

`check`: ours.json is {"cases": [{"name", "bodies": [HEX...]}]}: the bodies our encoder made
from the JSON lines, in the same order. Each is decoded with `fastavro.schemaless_reader` and
must give the same record as fastavro's own body (and be read to its last byte). Prints one
line per mismatch and exits 1 if there is any, else prints `N passed, 0 failed`.
"""

import io
import json
import sys
from pathlib import Path

import fastavro

NS = "com.example"

PRIMITIVES = {
    "type": "record",
    "name": "Primitives",
    "namespace": NS,
    "fields": [
        {"name": "n", "type": "null"},
        {"name": "flag", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "bytes"},
        {"name": "s", "type": "string"},
    ],
}

PRIMITIVE_RECORDS = [
    {"n": None, "flag": True, "i": 0, "l": 0, "f": 0.0, "d": 0.0, "b": b"", "s": ""},
    {"n": None, "flag": False, "i": -(2**31), "l": -(2**63), "f": -1.5, "d": 1e-300,
     "b": bytes(range(256)), "s": "h\u00e9llo \u2603 \U0001f600"},
    {"n": None, "flag": True, "i": 2**31 - 1, "l": 2**63 - 1, "f": 3.25e10, "d": -123456.789,
     "b": b"\x00\x7f\x80\xff", "s": "quote \" backslash \\ newline \n tab \t"},
    {"n": None, "flag": False, "i": 64, "l": -64, "f": 0.1, "d": 0.1, "b": b"zz", "s": "x" * 300},
]

COMPLEX = {
    "type": "record",
    "name": "Complex",
    "namespace": NS,
    "fields": [
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "long"}},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "namespace": "com.other",
                                   "fields": [{"name": "x", "type": "int"},
                                              {"name": "opt", "type": ["null", "string"]}]}},
        {"name": "items", "type": {"type": "array", "items": "com.other.Inner"}},
        {"name": "maybe", "type": ["null", "com.other.Inner", "Color", "Hash",
                                   {"type": "array", "items": "int"},
                                   {"type": "map", "values": "string"}, "double"]},
        {"name": "nums", "type": ["int", "long", "string"]},
        {"name": "bytes_or_null", "type": ["null", "bytes"]},
        {"name": "nested", "type": {"type": "map", "values": {"type": "array", "items": ["null", "float"]}}},
    ],
}

INNER = {"x": 1, "opt": None}
COMPLEX_RECORDS = [
    {"color": "RED", "hash": b"\x00\x01\x02\xff", "tags": [], "scores": {}, "inner": INNER, "items": [],
     "maybe": None, "nums": 5, "bytes_or_null": None, "nested": {}},
    {"color": "BLUE", "hash": b"abcd", "tags": ["a", "b", ""], "scores": {"x": -1, "y": 2**40},
     "inner": {"x": -7, "opt": "o"}, "items": [INNER, {"x": 2, "opt": "p"}],
     "maybe": ("com.other.Inner", {"x": 3, "opt": None}), "nums": ("long", 2**40),
     "bytes_or_null": b"\xfe\x00", "nested": {"k": [None, 1.5, -2.0], "e": []}},
    {"color": "GREEN", "hash": b"\xff\xff\xff\xff", "tags": ["t"], "scores": {"z": 0}, "inner": INNER,
     "items": [], "maybe": ("com.example.Color", "GREEN"), "nums": "str", "bytes_or_null": None,
     "nested": {}},
    {"color": "RED", "hash": b"hash", "tags": [], "scores": {}, "inner": INNER, "items": [],
     "maybe": ("com.example.Hash", b"\x80\x81\x82\x83"), "nums": 0, "bytes_or_null": None, "nested": {}},
    {"color": "RED", "hash": b"hash", "tags": [], "scores": {}, "inner": INNER, "items": [],
     "maybe": [1, 2, 3], "nums": 0, "bytes_or_null": None, "nested": {}},
    {"color": "RED", "hash": b"hash", "tags": [], "scores": {}, "inner": INNER, "items": [],
     "maybe": {"a": "b"}, "nums": 0, "bytes_or_null": None, "nested": {}},
    {"color": "RED", "hash": b"hash", "tags": [], "scores": {}, "inner": INNER, "items": [],
     "maybe": 2.5, "nums": 0, "bytes_or_null": None, "nested": {}},
]

LOGICAL = {
    "type": "record",
    "name": "Logical",
    "namespace": NS,
    "fields": [
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "time_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "time_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "dec_fixed", "type": {"type": "fixed", "name": "Dec8", "size": 8,
                                       "logicalType": "decimal", "precision": 18, "scale": 4}},
        {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "maybe_date", "type": ["null", {"type": "int", "logicalType": "date"}]},
    ],
}

LOGICAL_RECORDS = [
    # Values given as the underlying types: fastavro writes ints, longs, bytes and strings of
    # logical types as they are.
    {"date": 19700, "time_ms": 45_296_789, "time_us": 45_296_789_123, "ts_ms": 1_700_000_000_123,
     "ts_us": 1_700_000_000_123_456, "dec": (12345).to_bytes(2, "big", signed=True),
     "dec_fixed": (-1234567).to_bytes(8, "big", signed=True),
     "uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "maybe_date": None},
    {"date": -1, "time_ms": 0, "time_us": 0, "ts_ms": -1, "ts_us": 0, "dec": b"\x80",
     "dec_fixed": bytes(8), "uuid": "00000000-0000-0000-0000-000000000000", "maybe_date": 1},
]

USER_V1 = {"type": "record", "name": "User", "namespace": NS,
           "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
USER_V2 = {"type": "record", "name": "User", "namespace": NS,
           "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                      {"name": "email", "type": ["null", "string"], "default": None},
                      {"name": "country", "type": "string", "default": "NL"}]}

ADDRESS = {"type": "record", "name": "Address", "namespace": NS,
           "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "int"}]}
PERSON = {"type": "record", "name": "Person", "namespace": NS,
          "fields": [{"name": "name", "type": "string"},
                     {"name": "home", "type": "com.example.Address"},
                     {"name": "work", "type": ["null", "com.example.Address"]}]}

CASES = [
    ("primitives", PRIMITIVES, [], PRIMITIVE_RECORDS),
    ("complex", COMPLEX, [], COMPLEX_RECORDS),
    ("logical", LOGICAL, [], LOGICAL_RECORDS),
    ("user-v1", USER_V1, [], [{"id": 1, "name": "ann"}, {"id": -2, "name": "bob"}]),
    ("user-v2", USER_V2, [], [{"id": 3, "name": "cy", "email": "c@example.com", "country": "BE"},
                              {"id": 4, "name": "di", "email": None, "country": "NL"}]),
    ("person-references-address", PERSON, [ADDRESS],
     [{"name": "p", "home": {"street": "Dam 1", "zip": 1012}, "work": None},
      {"name": "q", "home": {"street": "", "zip": 0},
       "work": ("com.example.Address", {"street": "W", "zip": 9})}]),
    ("top-level-string", "string", [], ["", "plain"]),
    ("top-level-array", {"type": "array", "items": "int"}, [], [[], [1, -1, 2**31 - 1]]),
    ("top-level-union", ["null", "long", PRIMITIVES], [], [None, 7, PRIMITIVE_RECORDS[0]]),
]


def parsed(schema, references):
    named = {}
    for r in references:
        fastavro.parse_schema(r, named_schemas=named)
    return fastavro.parse_schema(schema, named_schemas=named)


def write(out):
    cases = []
    for name, schema, references, records in CASES:
        s = parsed(schema, references)
        rows = []
        for record in records:
            body = io.BytesIO()
            fastavro.schemaless_writer(body, s, record)
            text = io.StringIO()
            fastavro.json_writer(text, s, [record])
            lines = text.getvalue().splitlines()
            assert len(lines) == 1, lines
            rows.append({"body": body.getvalue().hex(), "json": lines[0]})
        cases.append({"name": name, "schema": json.dumps(schema),
                      "references": [json.dumps(r) for r in references], "records": rows})
    (out / "manifest.json").write_text(json.dumps({"cases": cases}, indent=1))


def check(out):
    ours = {c["name"]: c["bodies"] for c in json.loads((out / "ours.json").read_text())["cases"]}
    passed = failed = 0
    for name, schema, references, records in CASES:
        s = parsed(schema, references)
        bodies = ours.get(name)
        if bodies is None or len(bodies) != len(records):
            print(f"{name}: expected {len(records)} bodies, got {bodies!r:.80}")
            failed += 1
            continue
        for i, (record, hexbody) in enumerate(zip(records, bodies)):
            theirs = io.BytesIO()
            fastavro.schemaless_writer(theirs, s, record)
            expected = fastavro.schemaless_reader(io.BytesIO(theirs.getvalue()), s)
            stream = io.BytesIO(bytes.fromhex(hexbody))
            try:
                got = fastavro.schemaless_reader(stream, s)
            except Exception as e:  # noqa: BLE001 - any decode failure is a mismatch
                print(f"{name}[{i}]: fastavro cannot decode our body {hexbody}: {e!r}")
                failed += 1
                continue
            left = len(stream.getbuffer()) - stream.tell()
            if got != expected or left:
                print(f"{name}[{i}]: fastavro decodes our body to {got!r} ({left} bytes left), "
                      f"its own to {expected!r}")
                failed += 1
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    directory = Path(sys.argv[2])
    if sys.argv[1] == "write":
        write(directory)
    else:
        sys.exit(check(directory))
