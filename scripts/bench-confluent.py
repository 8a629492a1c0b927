"""confluent-kafka (librdkafka) as the baseline of the cluster section of scripts/bench
(examples/topicfs-bench.rs, `--cluster`). Prints one JSON object on stdout.

  consume BOOTSTRAP TOPIC PARTITION END
      reads the partition from offset 0 until the record at END-1 (an assign()ed consumer, no
      group commits, default fetch settings); {"seconds", "records", "bytes"}
  produce BOOTSTRAP TOPIC PARTITION FILE
      produces every line of FILE (without its newline) to the partition with acks=all and the
      default batching; waits for every acknowledgement; {"seconds", "records"}

  produce-variant BOOTSTRAP TOPIC PARTITION RECORDS LINGER_MS COMPRESSION PRODUCERS
      produces RECORDS records (values: the record's number, zero padded to 100 bytes) to the
      partition with linger.ms LINGER_MS, compression.type COMPRESSION (none, lz4, ...) and
      acks=all, from PRODUCERS producers fed in turn (record i from producer i % PRODUCERS, so
      their batches interleave in the partition); waits for every acknowledgement;
      {"seconds", "records"}

  produce-rate BOOTSTRAP TOPIC PARTITION RATE SECONDS
      produces records at about RATE records/s for SECONDS (values: the record's number, zero
      padded to 100 bytes), acks=all; waits for every acknowledgement;
      {"records", "last_ack": wall-clock time (epoch seconds) of the last acknowledgement}

  wide-consume BOOTSTRAP TOPIC RECORDS
      reads every partition of TOPIC from its start (one assign()ed consumer, no group
      commits, default fetch settings) until RECORDS records in all; {"seconds", "records"}
  wide-offsets BOOTSTRAP TOPIC SPEC
      every partition's offset for SPEC (latest, earliest, or a time in ms) in one
      AdminClient.list_offsets call (librdkafka batches it per leader); {"seconds",
      "partitions", "sum": the offsets added up}

"seconds" runs from creating the client to the last record consumed or acknowledged: it
includes connecting and the first metadata, as the mount's figure includes open().
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def consume(bootstrap, topic, partition, end):
    end = int(end)
    start = time.monotonic()
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "topicfs-bench",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, int(partition), 0)])
    records = nbytes = 0
    last = -1
    while last < end - 1:
        msgs = c.consume(num_messages=10000, timeout=10)
        if not msgs:
            raise SystemExit(f"no record for 10 s at offset {last + 1} of {end}")
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            records += 1
            v = m.value()
            nbytes += len(v) if v is not None else 0
            last = m.offset()
    seconds = time.monotonic() - start
    c.close()
    print(json.dumps({"seconds": seconds, "records": records, "bytes": nbytes}))


def produce(bootstrap, topic, partition, path):
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    partition = int(partition)
    failed = []

    def report(err, _m):
        if err is not None:
            failed.append(err)

    start = time.monotonic()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for line in lines:
        while True:
            try:
                p.produce(topic, line, partition=partition, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(120)
    seconds = time.monotonic() - start
    if left or failed:
        raise SystemExit(f"{left} records unacknowledged, {len(failed)} failed: {failed[:3]}")
    print(json.dumps({"seconds": seconds, "records": len(lines)}))


def produce_variant(bootstrap, topic, partition, records, linger, compression, producers):
    partition, records, producers = int(partition), int(records), int(producers)
    failed = []

    def report(err, _m):
        if err is not None:
            failed.append(err)

    start = time.monotonic()
    ps = [Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": int(linger),
                    "compression.type": compression}) for _ in range(producers)]
    for n in range(records):
        p = ps[n % producers]
        while True:
            try:
                p.produce(topic, b"%0100d" % n, partition=partition, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        if n % 1000 == 0:
            for q in ps:
                q.poll(0)
    left = sum(p.flush(120) for p in ps)
    seconds = time.monotonic() - start
    if left or failed:
        raise SystemExit(f"{left} records unacknowledged, {len(failed)} failed: {failed[:3]}")
    print(json.dumps({"seconds": seconds, "records": records}))


def produce_rate(bootstrap, topic, partition, rate, seconds):
    partition, rate, seconds = int(partition), float(rate), float(seconds)
    failed = []
    last_ack = [0.0]

    def report(err, _m):
        if err is not None:
            failed.append(err)
        last_ack[0] = time.time()

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    start = time.monotonic()
    n = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        due = int(elapsed * rate)
        while n < due:
            try:
                p.produce(topic, b"%0100d" % n, partition=partition, on_delivery=report)
                n += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        time.sleep(0.002)
    left = p.flush(120)
    if left or failed:
        raise SystemExit(f"{left} records unacknowledged, {len(failed)} failed: {failed[:3]}")
    print(json.dumps({"records": n, "last_ack": last_ack[0],
                      "rate": n / (time.monotonic() - start)}))


def partitions_of(admin, topic):
    md = admin.list_topics(topic, timeout=30)
    return sorted(md.topics[topic].partitions)


def wide_consume(bootstrap, topic, records):
    records = int(records)
    start = time.monotonic()
    from confluent_kafka.admin import AdminClient
    parts = partitions_of(AdminClient({"bootstrap.servers": bootstrap}), topic)
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "topicfs-bench",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    n = 0
    while n < records:
        msgs = c.consume(num_messages=10000, timeout=30)
        if not msgs:
            raise SystemExit(f"no record for 30 s after {n} of {records}")
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            n += 1
    seconds = time.monotonic() - start
    c.close()
    print(json.dumps({"seconds": seconds, "records": n, "partitions": len(parts)}))


def wide_offsets(bootstrap, topic, spec):
    from confluent_kafka.admin import AdminClient, OffsetSpec
    start = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = partitions_of(admin, topic)
    which = {"latest": OffsetSpec.latest(), "earliest": OffsetSpec.earliest()}.get(spec)
    if which is None:
        which = OffsetSpec.for_timestamp(int(spec))
    futures = admin.list_offsets({TopicPartition(topic, p): which for p in parts},
                                 request_timeout=60)
    total = sum(f.result().offset for f in futures.values())
    seconds = time.monotonic() - start
    print(json.dumps({"seconds": seconds, "partitions": len(parts), "sum": total}))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"consume": consume, "produce": produce, "produce-rate": produce_rate,
     "produce-variant": produce_variant,
     "wide-consume": wide_consume, "wide-offsets": wide_offsets}[cmd](*args)


if __name__ == "__main__":
    main()
