//! A topic's settings on a cluster (`TopicSource::topic_config` / `alter_topic_config` of
//! `ClusterSource`) against a scripted broker speaking Kafka's DescribeConfigs and
//! IncrementalAlterConfigs as a Kafka broker does (every setting with its source; changes
//! validated as a whole, all or nothing), and against one that offers neither (an older or
//! partial broker): `EOPNOTSUPP` naming the broker. And against tansu, which offers both
//! but keeps only the overrides set through it (doc/cluster-brokers.md).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use crate::common::tansu::Tansu;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, MetadataResponse,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use topicfs::Error;
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, ClusterSource};
use topicfs::source::{ConfigChange, ConfigEntry, ConfigSource, TopicSource};

const TOPIC: &str = "t";

/// The broker's settings of `TOPIC` besides its overrides: (name, value, DescribeConfigs
/// source), in an order that is not the names' (the source sorts them).
const BROKER_SETTINGS: &[(&str, &str, i8)] = &[
    ("segment.bytes", "1073741824", 5),
    ("cleanup.policy", "delete", 4),
    ("retention.ms", "604800000", 5),
    ("max.message.bytes", "2097152", 3),
    ("min.insync.replicas", "1", 2),
];

/// A scripted broker on 127.0.0.1; stops accepting when dropped.
struct ConfigBroker {
    addr: String,
    /// `TOPIC`'s overrides (DYNAMIC_TOPIC_CONFIG), changed by IncrementalAlterConfigs.
    overrides: Arc<Mutex<BTreeMap<String, String>>>,
    alters: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Drop for ConfigBroker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
    }
}

impl ConfigBroker {
    /// `configs`: whether it offers DescribeConfigs and IncrementalAlterConfigs.
    fn start(configs: bool) -> ConfigBroker {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let overrides = Arc::new(Mutex::new(BTreeMap::new()));
        let alters = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (o, a, s) = (Arc::clone(&overrides), Arc::clone(&alters), Arc::clone(&stop));
        thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (o, a) = (Arc::clone(&o), Arc::clone(&a));
                thread::spawn(move || serve(conn, addr.port(), configs, &o, &a));
            }
        });
        ConfigBroker { addr: addr.to_string(), overrides, alters, stop }
    }

    fn source(&self, read_only: bool) -> ClusterSource {
        let mut config = ClientConfig::default();
        config.set_pair("request.timeout.ms=3000").unwrap();
        let spec = format!("kafka://{}", self.addr);
        let client = Client::connect(parse_bootstrap(&spec).unwrap(), config).unwrap();
        ClusterSource::new(Arc::new(client), read_only)
    }
}

/// Kafka's validation of the settings this broker knows: `retention.ms` and `segment.bytes`
/// are numbers (`segment.bytes` at least 14), `cleanup.policy` is `delete` and/or `compact`.
/// The message is Kafka's `InvalidConfigurationException` text.
fn invalid(name: &str, value: &str) -> Option<String> {
    let bad = match name {
        "retention.ms" => value.parse::<i64>().is_err(),
        "segment.bytes" => value.parse::<i32>().map_or(true, |n| n < 14),
        "cleanup.policy" => !value.split(',').all(|p| p == "delete" || p == "compact"),
        _ => false,
    };
    bad.then(|| format!("Invalid value {value} for configuration {name}"))
}

fn serve(
    mut conn: TcpStream,
    port: u16,
    configs: bool,
    overrides: &Mutex<BTreeMap<String, String>>,
    alters: &AtomicUsize,
) {
    loop {
        let mut len = [0u8; 4];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        if conn.read_exact(&mut frame).is_err() {
            return;
        }
        let api = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let mut buf = Bytes::from(frame);
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version)).unwrap();
        let mut body = BytesMut::new();
        match api {
            ApiKey::ApiVersions => {
                let mut keys = vec![(ApiKey::ApiVersions, 0, 3), (ApiKey::Metadata, 0, 12)];
                if configs {
                    keys.push((ApiKey::DescribeConfigs, 0, 4));
                    keys.push((ApiKey::IncrementalAlterConfigs, 0, 1));
                }
                let r = ApiVersionsResponse::default().with_api_keys(
                    keys.iter()
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k as i16)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect(),
                );
                r.encode(&mut body, version).unwrap();
            }
            ApiKey::Metadata => {
                let r = MetadataResponse::default()
                    .with_brokers(vec![
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(1))
                            .with_host(StrBytes::from_static_str("127.0.0.1"))
                            .with_port(i32::from(port)),
                    ])
                    .with_controller_id(BrokerId(1))
                    .with_topics(vec![
                        MetadataResponseTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))
                            .with_partitions(vec![
                                MetadataResponsePartition::default()
                                    .with_partition_index(0)
                                    .with_leader_id(BrokerId(1))
                                    .with_replica_nodes(vec![BrokerId(1)])
                                    .with_isr_nodes(vec![BrokerId(1)]),
                            ]),
                    ]);
                r.encode(&mut body, version).unwrap();
            }
            ApiKey::DescribeConfigs => {
                let req = DescribeConfigsRequest::decode(&mut buf, version).unwrap();
                let overrides = overrides.lock().unwrap();
                let results = req
                    .resources
                    .iter()
                    .map(|r| {
                        let result = DescribeConfigsResult::default()
                            .with_resource_type(r.resource_type)
                            .with_resource_name(r.resource_name.clone());
                        if r.resource_type != 2 || r.resource_name.as_str() != TOPIC {
                            return result.with_error_code(3);
                        }
                        let entry = |name: &str, value: Option<&str>, source: i8| {
                            DescribeConfigsResourceResult::default()
                                .with_name(StrBytes::from_string(name.to_string()))
                                .with_value(value.map(|v| StrBytes::from_string(v.to_string())))
                                .with_config_source(source)
                        };
                        let mut configs: Vec<_> = BROKER_SETTINGS
                            .iter()
                            .filter(|(n, _, _)| !overrides.contains_key(*n))
                            .map(|&(n, v, s)| entry(n, Some(v), s))
                            .collect();
                        configs.extend(overrides.iter().map(|(n, v)| entry(n, Some(v), 1)));
                        // A sensitive setting: no value.
                        configs.push(entry("sasl.jaas.config", None, 4).with_is_sensitive(true));
                        result.with_configs(configs)
                    })
                    .collect();
                DescribeConfigsResponse::default()
                    .with_results(results)
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::IncrementalAlterConfigs => {
                alters.fetch_add(1, Ordering::SeqCst);
                let req = IncrementalAlterConfigsRequest::decode(&mut buf, version).unwrap();
                let mut overrides = overrides.lock().unwrap();
                let responses = req
                    .resources
                    .iter()
                    .map(|r| {
                        let response = AlterConfigsResourceResponse::default()
                            .with_resource_type(r.resource_type)
                            .with_resource_name(r.resource_name.clone());
                        if r.resource_name.as_str() != TOPIC {
                            return response.with_error_code(3);
                        }
                        // Validated as a whole first: one bad value changes nothing.
                        for c in &r.configs {
                            let value = c.value.as_ref().map_or("", |v| v.as_str());
                            if c.config_operation == 0
                                && let Some(message) = invalid(c.name.as_str(), value)
                            {
                                return response
                                    .with_error_code(40)
                                    .with_error_message(Some(StrBytes::from_string(message)));
                            }
                        }
                        if req.validate_only {
                            return response;
                        }
                        for c in &r.configs {
                            match (c.config_operation, &c.value) {
                                (0, Some(v)) => {
                                    overrides.insert(c.name.to_string(), v.to_string());
                                }
                                (1, _) => {
                                    overrides.remove(c.name.as_str());
                                }
                                other => panic!("unexpected operation {other:?}"),
                            }
                        }
                        response
                    })
                    .collect();
                IncrementalAlterConfigsResponse::default()
                    .with_responses(responses)
                    .encode(&mut body, version)
                    .unwrap();
            }
            other => panic!("the config broker does not answer {other:?}"),
        }
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut frame, api.response_header_version(version))
            .unwrap();
        frame.extend_from_slice(&body);
        let mut out = (frame.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&frame);
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}

fn entry(name: &str, value: Option<&str>, source: ConfigSource) -> ConfigEntry {
    ConfigEntry { name: name.to_string(), value: value.map(str::to_string), source, applied: true }
}

fn set(name: &str, value: &str) -> ConfigChange {
    ConfigChange::Set { name: name.to_string(), value: value.to_string() }
}

#[test]
fn cluster_topic_config_lists_every_setting_sorted_with_its_source() {
    let broker = ConfigBroker::start(true);
    let source = broker.source(true);
    assert_eq!(
        source.topic_config(TOPIC).unwrap(),
        vec![
            entry("cleanup.policy", Some("delete"), ConfigSource::BrokerStatic),
            entry("max.message.bytes", Some("2097152"), ConfigSource::BrokerDefault),
            entry("min.insync.replicas", Some("1"), ConfigSource::BrokerDefault),
            entry("retention.ms", Some("604800000"), ConfigSource::KafkaDefault),
            entry("sasl.jaas.config", None, ConfigSource::BrokerStatic),
            entry("segment.bytes", Some("1073741824"), ConfigSource::KafkaDefault),
        ]
    );
    // An unknown topic: NotFound (ENOENT) from Metadata, before any DescribeConfigs.
    assert_eq!(source.topic_config("nope").unwrap_err().errno(), libc::ENOENT);
}

/// What an `append` handle's line limit follows: the one setting, as `topic_config` states it.
#[test]
fn cluster_max_message_bytes_is_the_topics_effective_setting() {
    let broker = ConfigBroker::start(true);
    let source = broker.source(false);
    assert_eq!(source.max_message_bytes(TOPIC).unwrap(), Some(2_097_152), "the broker's");
    source.alter_topic_config(TOPIC, &[set("max.message.bytes", "1000")]).unwrap();
    assert_eq!(source.max_message_bytes(TOPIC).unwrap(), Some(1000), "the topic's override");
    assert_eq!(source.max_message_bytes("nope").unwrap_err().errno(), libc::ENOENT);
}

#[test]
fn cluster_alter_topic_config_sets_and_removes_overrides_all_or_nothing() {
    let broker = ConfigBroker::start(true);
    let source = broker.source(false);
    source
        .alter_topic_config(TOPIC, &[set("retention.ms", "-1"), set("cleanup.policy", "compact")])
        .unwrap();
    let config = source.topic_config(TOPIC).unwrap();
    assert!(config.contains(&entry("retention.ms", Some("-1"), ConfigSource::TopicOverride)));
    assert!(config.contains(&entry(
        "cleanup.policy",
        Some("compact"),
        ConfigSource::TopicOverride
    )));
    // One bad value among good ones: EINVAL naming the setting and the broker, nothing changed.
    let before = broker.overrides.lock().unwrap().clone();
    let err = source
        .alter_topic_config(TOPIC, &[set("segment.bytes", "1048576"), set("retention.ms", "soon")])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert_eq!(err.errno(), libc::EINVAL);
    let text = err.to_string();
    assert!(text.contains("retention.ms") && text.contains("soon"), "{text}");
    assert!(text.contains(&broker.addr) && text.contains("INVALID_CONFIG"), "{text}");
    assert_eq!(*broker.overrides.lock().unwrap(), before, "nothing of it applied");
    // Remove: back to the broker's setting.
    source
        .alter_topic_config(TOPIC, &[ConfigChange::Remove { name: "retention.ms".into() }])
        .unwrap();
    let config = source.topic_config(TOPIC).unwrap();
    assert!(config.contains(&entry("retention.ms", Some("604800000"), ConfigSource::KafkaDefault)));
    // Refused before any request: a setting changed twice, an empty name, a read-only mount,
    // an unknown topic.
    let sent = broker.alters.load(Ordering::SeqCst);
    let twice = [set("retention.ms", "1"), ConfigChange::Remove { name: "retention.ms".into() }];
    assert_eq!(source.alter_topic_config(TOPIC, &twice).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(
        source.alter_topic_config(TOPIC, &[set("", "1")]).unwrap_err().errno(),
        libc::EINVAL
    );
    let read_only = broker.source(true);
    let err = read_only.alter_topic_config(TOPIC, &[set("retention.ms", "1")]).unwrap_err();
    assert_eq!(err.errno(), libc::EROFS);
    assert_eq!(
        source.alter_topic_config("nope", &[set("retention.ms", "1")]).unwrap_err().errno(),
        libc::ENOENT
    );
    assert_eq!(broker.alters.load(Ordering::SeqCst), sent);
}

/// What each `write()` of a cluster mount's `config` asks: IncrementalAlterConfigs with
/// `validate_only`, which the broker answers as it would the change, applying nothing.
#[test]
fn cluster_check_topic_config_validates_with_the_broker_and_applies_nothing() {
    let broker = ConfigBroker::start(true);
    let source = broker.source(false);
    let before = broker.overrides.lock().unwrap().clone();
    let sent = broker.alters.load(Ordering::SeqCst);
    source.check_topic_config(TOPIC, &[set("retention.ms", "1000")]).unwrap();
    let err = source
        .check_topic_config(TOPIC, &[set("segment.bytes", "1048576"), set("retention.ms", "soon")])
        .unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    assert!(err.to_string().contains("retention.ms"), "{err}");
    assert_eq!(broker.alters.load(Ordering::SeqCst), sent + 2, "asked the broker");
    assert_eq!(*broker.overrides.lock().unwrap(), before, "nothing applied");
    // MakeKnown is no change on a cluster; nothing to ask.
    source.check_topic_config(TOPIC, &[ConfigChange::MakeKnown]).unwrap();
    source.alter_topic_config(TOPIC, &[ConfigChange::MakeKnown]).unwrap();
    assert_eq!(broker.alters.load(Ordering::SeqCst), sent + 2);
    assert!(source.check_value_prefix("retention.ms", "abc").is_ok(), "the broker judges");
    let err = broker.source(true).check_topic_config(TOPIC, &[set("retention.ms", "1")]);
    assert_eq!(err.unwrap_err().errno(), libc::EROFS);
}

#[test]
fn cluster_topic_config_on_a_broker_without_the_apis_is_eopnotsupp_naming_the_broker() {
    let broker = ConfigBroker::start(false);
    let source = broker.source(false);
    for err in [
        source.topic_config(TOPIC).unwrap_err(),
        source.alter_topic_config(TOPIC, &[set("retention.ms", "1")]).unwrap_err(),
    ] {
        assert!(matches!(err, Error::UnsupportedApi { .. }), "{err:?}");
        assert_eq!(err.errno(), libc::EOPNOTSUPP);
        let text = err.to_string();
        assert!(text.contains(&broker.addr), "names the broker: {text}");
        assert!(text.contains("Configs"), "names the API: {text}");
    }
}

#[test]
fn cluster_topic_config_on_tansu_round_trips_overrides_it_keeps() {
    let t = Tansu::start();
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=5000").unwrap();
    let spec = format!("kafka://{}", t.addr());
    let client = Arc::new(Client::connect(parse_bootstrap(&spec).unwrap(), config).unwrap());
    client.create_topic("configured", 1, &[]).unwrap();
    let source = ClusterSource::new(client, false);
    let changes = [set("retention.ms", "86400000"), set("cleanup.policy", "compact")];
    source.alter_topic_config("configured", &changes).unwrap();
    let value = |name: &str| {
        let config = source.topic_config("configured").unwrap();
        config.iter().find(|e| e.name == name).map(|e| (e.value.clone(), e.source))
    };
    // tansu states what it keeps with source DEFAULT_CONFIG (Kafka: DYNAMIC_TOPIC_CONFIG).
    assert_eq!(value("retention.ms"), Some((Some("86400000".into()), ConfigSource::KafkaDefault)));
    assert_eq!(value("cleanup.policy"), Some((Some("compact".into()), ConfigSource::KafkaDefault)));
    source
        .alter_topic_config("configured", &[ConfigChange::Remove { name: "retention.ms".into() }])
        .unwrap();
    assert_eq!(value("retention.ms"), None, "tansu lists no default once the override is gone");
    assert_eq!(value("cleanup.policy"), Some((Some("compact".into()), ConfigSource::KafkaDefault)));
    // tansu validates nothing: a value Kafka refuses (INVALID_CONFIG) is kept.
    source.alter_topic_config("configured", &[set("retention.ms", "soon")]).unwrap();
    assert_eq!(value("retention.ms"), Some((Some("soon".into()), ConfigSource::KafkaDefault)));
    // tansu applies a change sent with validate_only (what each write of `config` sends; a
    // Kafka broker only validates it).
    source.check_topic_config("configured", &[set("segment.ms", "1234")]).unwrap();
    assert_eq!(value("segment.ms"), Some((Some("1234".into()), ConfigSource::KafkaDefault)));
    assert_eq!(source.topic_config("nope").unwrap_err().errno(), libc::ENOENT);
}
