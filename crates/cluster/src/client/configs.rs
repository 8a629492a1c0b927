//! A topic's settings: DescribeConfigs and IncrementalAlterConfigs (resource type TOPIC).
//!
//! Both go to any broker (a KRaft broker forwards the change to the controller, as the Java
//! admin client relies on). A broker that does not offer them (ApiVersions) gives
//! [`Error::UnsupportedApi`] naming it (`EOPNOTSUPP`); nothing is faked.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::Client;
use crate::errors::{error_name, kafka_error};
use topicfs_source::error::{Error, Result};

/// `ConfigResource.Type.TOPIC`.
const RESOURCE_TOPIC: i8 = 2;

/// A topic setting as DescribeConfigs states it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedConfig {
    pub name: String,
    /// `None` for a sensitive setting (the broker does not say it) or one without a value.
    pub value: Option<String>,
    /// Kafka's `ConfigSource` id: 1 DYNAMIC_TOPIC_CONFIG, 2 DYNAMIC_BROKER_CONFIG,
    /// 3 DYNAMIC_DEFAULT_BROKER_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG, 0 UNKNOWN, ...
    pub source: i8,
    pub read_only: bool,
    pub sensitive: bool,
}

/// One IncrementalAlterConfigs operation on a setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOp {
    /// `SET` (0) to the value.
    Set(String),
    /// `DELETE` (1): back to the broker's default.
    Delete,
}

impl Client {
    /// DescribeConfigs of `topic`: the broker that answered, and every setting it states for
    /// the topic, in its order.
    pub fn describe_topic_config(&self, topic: &str) -> Result<(String, Vec<DescribedConfig>)> {
        self.describe_topic_config_keys(topic, None)
    }

    /// [`Client::describe_topic_config`] of only the settings named in `keys` (`None`: every
    /// setting). A broker may state more than asked; the caller picks by name.
    pub fn describe_topic_config_keys(
        &self,
        topic: &str,
        keys: Option<&[&str]>,
    ) -> Result<(String, Vec<DescribedConfig>)> {
        let keys: Option<Vec<StrBytes>> =
            keys.map(|k| k.iter().map(|n| StrBytes::from_string((*n).to_string())).collect());
        let deadline = self.deadline();
        self.retry("DescribeConfigs", deadline, |deadline| {
            let conn = self.any_conn(deadline)?;
            let version = conn.version::<DescribeConfigsRequest>(4)?;
            let req = DescribeConfigsRequest::default()
                .with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(RESOURCE_TOPIC)
                        .with_resource_name(StrBytes::from_string(topic.to_string()))
                        .with_configuration_keys(keys.clone()),
                ])
                .with_include_synonyms(false)
                .with_include_documentation(false);
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            let result = r.results.into_iter().find(|r| r.resource_name.as_str() == topic);
            let Some(result) = result else {
                return Err(Error::Protocol {
                    broker,
                    what: format!("DescribeConfigs answer without topic {topic}"),
                });
            };
            let message = result.error_message.as_ref().map(|m| m.to_string());
            resource_error(&broker, "DescribeConfigs", result.error_code, topic, message)?;
            let configs = result
                .configs
                .into_iter()
                .map(|c| DescribedConfig {
                    name: c.name.to_string(),
                    value: c.value.map(|v| v.to_string()),
                    source: c.config_source,
                    read_only: c.read_only,
                    sensitive: c.is_sensitive,
                })
                .collect();
            Ok((broker, configs))
        })
    }

    /// IncrementalAlterConfigs of `topic`: every operation in one request for the one
    /// resource, which the broker validates and applies together (all or nothing); with
    /// `validate_only`, validates them and applies nothing.
    pub fn alter_topic_config(
        &self,
        topic: &str,
        ops: &[(String, ConfigOp)],
        validate_only: bool,
    ) -> Result<()> {
        let deadline = self.deadline();
        self.retry("IncrementalAlterConfigs", deadline, |deadline| {
            let conn = self.any_conn(deadline)?;
            let version = conn.version::<IncrementalAlterConfigsRequest>(1)?;
            let configs = ops
                .iter()
                .map(|(name, op)| {
                    let config =
                        AlterableConfig::default().with_name(StrBytes::from_string(name.clone()));
                    match op {
                        ConfigOp::Set(value) => config
                            .with_config_operation(0)
                            .with_value(Some(StrBytes::from_string(value.clone()))),
                        ConfigOp::Delete => config.with_config_operation(1).with_value(None),
                    }
                })
                .collect();
            let req = IncrementalAlterConfigsRequest::default()
                .with_resources(vec![
                    AlterConfigsResource::default()
                        .with_resource_type(RESOURCE_TOPIC)
                        .with_resource_name(StrBytes::from_string(topic.to_string()))
                        .with_configs(configs),
                ])
                .with_validate_only(validate_only);
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            let Some(result) = r.responses.iter().find(|r| r.resource_name.as_str() == topic)
            else {
                return Err(Error::Protocol {
                    broker,
                    what: format!("IncrementalAlterConfigs answer without topic {topic}"),
                });
            };
            let message = result.error_message.as_ref().map(|m| m.to_string());
            resource_error(&broker, "IncrementalAlterConfigs", result.error_code, topic, message)
        })
    }
}

/// The error of one resource's answer: `NotFound` for UNKNOWN_TOPIC_OR_PARTITION (the caller
/// checked the topic exists, so a retry would not help); `InvalidInput` with the broker's
/// message (which names the setting and the rule) for INVALID_CONFIG, INVALID_REQUEST and
/// POLICY_VIOLATION; otherwise [`kafka_error`].
fn resource_error(
    broker: &str,
    api: &'static str,
    code: i16,
    topic: &str,
    message: Option<String>,
) -> Result<()> {
    match code {
        0 => Ok(()),
        3 => Err(Error::NotFound(format!("topic {topic}"))),
        40 | 42 | 44 => Err(Error::InvalidInput(format!(
            "topic {topic}: {} ({api} to broker {broker}: {})",
            message.as_deref().unwrap_or("refused"),
            error_name(code)
        ))),
        _ => Err(kafka_error(broker, api, code, Some(topic), None, message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resources_error_code_becomes_notfound_invalid_input_or_a_kafka_error() {
        assert!(resource_error("b:9092", "DescribeConfigs", 0, "t", None).is_ok());
        let gone = resource_error("b:9092", "DescribeConfigs", 3, "t", None).unwrap_err();
        assert_eq!(gone.errno(), libc::ENOENT);
        for code in [40, 42, 44] {
            let message = Some("Invalid value x for configuration retention.ms".to_string());
            let err = resource_error("b:9092", "IncrementalAlterConfigs", code, "t", message)
                .unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{code}: {err:?}");
            let text = err.to_string();
            assert!(text.contains("retention.ms") && text.contains("b:9092"), "{text}");
        }
        // TOPIC_AUTHORIZATION_FAILED stays Kafka's error (EACCES), naming the broker.
        let denied = resource_error("b:9092", "DescribeConfigs", 29, "t", None).unwrap_err();
        assert_eq!(denied.errno(), libc::EACCES);
        assert!(denied.to_string().contains("b:9092"), "{denied}");
    }
}
