//! Values with schemas (Confluent Schema Registry): decoding to JSON and encoding from JSON.

pub mod protobuf;
