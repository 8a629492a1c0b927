"""fastavro as the baseline of the records-with-schemas section of scripts/bench
(examples/bench/schemas.rs, `--schemas`, issue 35). Prints one JSON object on stdout.

  generate OUT N
      writes OUT/values.bin: N Avro values of the "order" schema below in the Confluent wire
      format (byte 0, the 4-byte big-endian schema id, the body from fastavro's
      schemaless_writer), each preceded by its length (4 bytes, big-endian), and
      OUT/schemas.json: the `_schemas` records Schema Registry writes for it ([[key, value]],
      the texts as the registry's KafkaStore serializes them); {"records", "bytes", "seconds"}
  decode VALUES SCHEMAS
      reads VALUES (as written by generate) and the schemas into memory, untimed; then, timed,
      for every value: checks the magic byte, finds the schema by the id in the header, decodes
      the body with fastavro's schemaless_reader, turns it into JSON text with json.dumps and
      writes the text and a newline to /dev/null; {"seconds", "records", "json_bytes"}
  show VALUES SCHEMAS I
      the value number I in fastavro's Avro JSON encoding (fastavro.json_writer), as the mount
      must show it (untimed; the bench's check that both decode the same)

The values are deterministic in N: record n has id n, a customer of 1,000, a total, one of four
statuses, a coupon on one record in three (else null), a quantity, a SKU and a note.
"""

import io
import json
import struct
import sys
import time
from pathlib import Path

import fastavro

SCHEMA_ID = 1
SUBJECT = "orders-value"
ORDER = {
    "type": "record", "name": "Order", "namespace": "com.example.shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "total", "type": {
            "type": "record", "name": "Money", "namespace": "com.example.common",
            "fields": [{"name": "currency", "type": "string"},
                       {"name": "units", "type": "long"},
                       {"name": "cents", "type": "int"}]}},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["PLACED", "PAID", "SHIPPED", "RETURNED"]}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "quantity", "type": "int"},
        {"name": "sku", "type": "string"},
        {"name": "note", "type": "string"},
    ],
}
STATUSES = ORDER["fields"][3]["type"]["symbols"]


def compact(value):
    """JSON as the registry's Jackson writes it (no spaces), keys in the order given."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def order(n):
    return {
        "id": n,
        "customer": f"customer-{n % 1000:04d}",
        "total": {"currency": "EUR", "units": n % 100_000, "cents": n % 100},
        "status": STATUSES[n % 4],
        "coupon": f"SAVE-{n % 10_000:04d}" if n % 3 == 0 else None,
        "quantity": 1 + n % 7,
        "sku": f"sku-{(n * 7919) % 1_000_000:08d}",
        "note": "deliver to the back door, ring twice, then wait",
    }


def schemas_records():
    text = compact(ORDER)
    key = {"keytype": "SCHEMA", "subject": SUBJECT, "version": 1, "magic": 1}
    value = {"subject": SUBJECT, "version": 1, "id": SCHEMA_ID, "schema": text, "deleted": False}
    return [[compact({"keytype": "NOOP", "magic": 0}), None],
            [compact(key), compact(value)]]


def generate(out, n):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n = int(n)
    schema = fastavro.parse_schema(ORDER)
    header = b"\x00" + struct.pack(">I", SCHEMA_ID)
    start = time.monotonic()
    total = 0
    with open(out / "values.bin", "wb") as f:
        chunk = 10_000
        for first in range(0, n, chunk):
            buf = io.BytesIO()
            parts = []
            for i in range(first, min(n, first + chunk)):
                buf.seek(0)
                buf.truncate()
                fastavro.schemaless_writer(buf, schema, order(i))
                body = buf.getvalue()
                parts.append(struct.pack(">I", 5 + len(body)) + header + body)
                total += 5 + len(body)
            f.write(b"".join(parts))
    (out / "schemas.json").write_text(json.dumps(schemas_records()) + "\n")
    print(json.dumps({"records": n, "bytes": total, "seconds": time.monotonic() - start}))


def read_values(path):
    data = Path(path).read_bytes()
    values = []
    pos = 0
    while pos < len(data):
        (size,) = struct.unpack_from(">I", data, pos)
        values.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return values


def read_schemas(path):
    """id -> parsed schema, from the `_schemas` records."""
    out = {}
    for key, value in json.loads(Path(path).read_text()):
        if value is None or json.loads(key).get("keytype") != "SCHEMA":
            continue
        v = json.loads(value)
        out[v["id"]] = fastavro.parse_schema(json.loads(v["schema"]))
    return out


def decode(values_path, schemas_path):
    values = read_values(values_path)
    schemas = read_schemas(schemas_path)
    reader = fastavro.schemaless_reader
    dumps = json.dumps
    unpack = struct.unpack_from
    json_bytes = 0
    with open("/dev/null", "w") as sink:
        start = time.monotonic()
        for v in values:
            if v[0] != 0:
                raise SystemExit(f"magic byte {v[0]}")
            schema = schemas[unpack(">I", v, 1)[0]]
            buf = io.BytesIO(v)
            buf.seek(5)
            text = dumps(reader(buf, schema))
            sink.write(text)
            sink.write("\n")
            json_bytes += len(text) + 1
        seconds = time.monotonic() - start
    print(json.dumps({"seconds": seconds, "records": len(values), "json_bytes": json_bytes}))


def show(values_path, schemas_path, i):
    values = read_values(values_path)
    schemas = read_schemas(schemas_path)
    v = values[int(i)]
    schema = schemas[struct.unpack_from(">I", v, 1)[0]]
    datum = fastavro.schemaless_reader(io.BytesIO(v[5:]), schema)
    text = io.StringIO()
    fastavro.json_writer(text, schema, [datum])
    print(text.getvalue().strip())


if __name__ == "__main__":
    commands = {"generate": generate, "decode": decode, "show": show}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
