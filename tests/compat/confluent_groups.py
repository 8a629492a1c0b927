"""confluent-kafka (librdkafka) as the independent client of tests/cluster/cluster_groups.rs:
consumer-group offsets committed and read through Kafka's own group APIs.

Subcommands (JSON on stdout):
  committed BOOTSTRAP GROUP TOPIC PARTITIONS
      Consumer.committed() for partitions 0..PARTITIONS-1 of TOPIC: {"<p>": offset or null}
      (null where the group has no commit)
  commit BOOTSTRAP GROUP TOPIC P:OFFSET...
      Consumer.commit(offsets=..., asynchronous=False) with assign() only (no subscription,
      as a standalone committer); prints the committed() that follows
  member BOOTSTRAP GROUP TOPIC
      joins GROUP (subscribe), polls until it has an assignment and a record, then prints
      {"assignment": [...], "consumed": n} as one line and waits for commands on stdin:
      "committed" prints committed() of its assignment, "commit P:OFFSET" commits as the
      member (its generation) and prints committed(), "close" leaves the group. Each answer
      is one JSON line.
"""

import json
import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition


def consumer(bootstrap, group):
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 30000,
    })


def committed_of(c, tps):
    out = {}
    for tp in c.committed(tps, timeout=20):
        if tp.error is not None:
            raise KafkaException(tp.error)
        out[str(tp.partition)] = tp.offset if tp.offset >= 0 else None
    return out


def parse_offsets(topic, specs):
    out = []
    for spec in specs:
        p, o = spec.split(":")
        out.append(TopicPartition(topic, int(p), int(o)))
    return out


def committed(bootstrap, group, topic, partitions):
    c = consumer(bootstrap, group)
    tps = [TopicPartition(topic, p) for p in range(int(partitions))]
    print(json.dumps(committed_of(c, tps)))
    c.close()


def commit(bootstrap, group, topic, *specs):
    c = consumer(bootstrap, group)
    offsets = parse_offsets(topic, specs)
    c.assign(offsets)
    for tp in c.commit(offsets=offsets, asynchronous=False):
        if tp.error is not None:
            raise KafkaException(tp.error)
    print(json.dumps(committed_of(c, [TopicPartition(topic, tp.partition) for tp in offsets])))
    c.close()


def member(bootstrap, group, topic):
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    consumed = 0
    for _ in range(600):
        m = c.poll(0.1)
        if m is not None:
            if m.error():
                raise KafkaException(m.error())
            consumed += 1
        if consumed and c.assignment():
            break
    else:
        raise SystemExit("no assignment and record within 60 s")
    assignment = [[tp.topic, tp.partition] for tp in c.assignment()]
    print(json.dumps({"assignment": assignment, "consumed": consumed}), flush=True)
    tps = [TopicPartition(t, p) for t, p in assignment]
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        # Keep the membership alive between commands (librdkafka heartbeats in the
        # background; polling serves its callbacks).
        c.poll(0)
        if words[0] == "committed":
            print(json.dumps(committed_of(c, tps)), flush=True)
        elif words[0] == "commit":
            offsets = parse_offsets(topic, words[1:])
            try:
                c.commit(offsets=offsets, asynchronous=False)
                print(json.dumps(committed_of(c, tps)), flush=True)
            except KafkaException as e:
                print(json.dumps({"error": str(e)}), flush=True)
        elif words[0] == "close":
            break
    c.close()
    print(json.dumps({"closed": True}), flush=True)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"committed": committed, "commit": commit, "member": member}[cmd](*args)


if __name__ == "__main__":
    main()
