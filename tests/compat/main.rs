//! Compatibility with Kafka's own clients: kafka-python decodes what topicfs writes, topicfs
//! decodes the broker corpus, and the topic-level partitioner matches Kafka's.

mod manifest;

mod compat_cleaner;
mod compat_fixtures;
mod compat_kafka_python;
mod topic_partitioner_compat;
