"""confluent-kafka (librdkafka) as the independent client of tests/cluster/cluster_confluent.rs.

Subcommands (JSON on stdout; bytes as base64, null as null):
  consume BOOTSTRAP TOPIC PARTITION COUNT ISOLATION
      reads COUNT records from offset 0 (isolation: read_committed | read_uncommitted)
  produce BOOTSTRAP TOPIC PARTITION CODEC N
      produces N keyed records with headers and timestamps with compression.type=CODEC,
      linger so they share batches; prints them with the offsets the broker acknowledged
  txn BOOTSTRAP TOPIC PARTITION
      transactional producer: commits ["c1","c2"], aborts ["a1","a2","a3"], commits ["c3"];
      exit status 3 with the reason on stderr if the broker does not support transactions
  offsets_for_times BOOTSTRAP TOPIC PARTITION TS...
      the offset for each timestamp (-1: none)
"""

import base64
import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

T0 = 1_767_225_600_000


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def record_json(m):
    ts_type, ts = m.timestamp()
    return {
        "offset": m.offset(),
        "timestamp": ts,
        "key": b64(m.key()),
        "value": b64(m.value()),
        "headers": [[k, b64(v)] for k, v in (m.headers() or [])],
    }


def consume(bootstrap, topic, partition, count, isolation):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "topicfs-xcheck",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, int(partition), 0)])
    out, empty_polls = [], 0
    while len(out) < int(count) and empty_polls < 100:
        m = c.poll(0.2)
        if m is None:
            empty_polls += 1
            continue
        if m.error():
            raise KafkaException(m.error())
        out.append(record_json(m))
    c.close()
    print(json.dumps(out))


def produce(bootstrap, topic, partition, codec, n):
    p = Producer({
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "linger.ms": 50,
        "enable.idempotence": False,
        "acks": "all",
    })
    acked = {}

    def report(err, m):
        if err is not None:
            raise KafkaException(err)
        acked[m.offset()] = m

    sent = []
    for i in range(int(n)):
        key = None if i % 4 == 0 else f"k{i % 5}".encode()
        value = None if i == 3 else f"{codec} record {i} ".encode() + b"y" * (i * 3)
        headers = [("n", str(i).encode()), ("empty", None)] if i % 2 else None
        ts = T0 + i * 10
        p.produce(topic, value=value, key=key, headers=headers, partition=int(partition),
                  timestamp=ts, on_delivery=report)
        sent.append({"key": b64(key), "value": b64(value), "timestamp": ts,
                     "headers": [[k, b64(v)] for k, v in (headers or [])]})
    if p.flush(30) != 0:
        raise SystemExit("produce: not all records were acknowledged")
    offsets = sorted(acked)
    for rec, off in zip(sent, offsets):
        rec["offset"] = off
    print(json.dumps(sent))


def txn(bootstrap, topic, partition):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "topicfs-xcheck-txn",
                  "transaction.timeout.ms": 10000})
    try:
        p.init_transactions(20)
    except KafkaException as e:
        print(f"init_transactions: {e}", file=sys.stderr)
        raise SystemExit(3)
    for values, commit in ((["c1", "c2"], True), (["a1", "a2", "a3"], False), (["c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode(), partition=int(partition))
        p.flush(20)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    print(json.dumps({"committed": ["c1", "c2", "c3"], "aborted": ["a1", "a2", "a3"]}))


def offsets_for_times(bootstrap, topic, partition, *timestamps):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "topicfs-xcheck"})
    out = []
    for ts in timestamps:
        [tp] = c.offsets_for_times([TopicPartition(topic, int(partition), int(ts))], 20)
        out.append(tp.offset)
    c.close()
    print(json.dumps(out))


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"consume": consume, "produce": produce, "txn": txn, "offsets_for_times": offsets_for_times}[cmd](*args)
