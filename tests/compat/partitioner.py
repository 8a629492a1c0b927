"""Kafka's default partitioner as kafka-python implements it, for tests/compat/topic_partitioner_compat.rs.

Reads a JSON list of {"key": base64, "partitions": n} from stdin and prints a JSON list of
{"murmur2": signed 32-bit hash, "partition": p}: the hash from kafka-python's pure-Python port of
Kafka's Utils.murmur2 (kafka.partitioner.default.murmur2, written independently of topicfs), the
partition from kafka-python's DefaultPartitioner over a cluster whose partitions are 0..n-1.
"""

import base64
import json
import sys

from kafka.partitioner.default import DefaultPartitioner, murmur2


class Cluster:
    """The three ClusterMetadata methods DefaultPartitioner calls, for one topic."""

    def __init__(self, topic, partitions):
        self.topic = topic
        self.all = set(range(partitions))

    def topics(self):
        return {self.topic}

    def partitions_for_topic(self, topic):
        return self.all

    def available_partitions_for_topic(self, topic):
        return self.all


def signed(h):
    return h - (1 << 32) if h >= 1 << 31 else h


def main():
    partitioner = DefaultPartitioner()
    out = []
    for case in json.load(sys.stdin):
        key = base64.b64decode(case["key"])
        cluster = Cluster("t", case["partitions"])
        p = partitioner.partition("t", key, key, None, None, cluster)
        out.append({"murmur2": signed(murmur2(key)), "partition": p})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
