//! Kafka error codes: their names, which ones a client retries, and how they become
//! [`Error::Kafka`].

use kafka_protocol::ResponseError;

use topicfs_source::error::Error;

/// Kafka's name of an error code (`NOT_LEADER_OR_FOLLOWER`), from kafka-protocol's variant
/// names; an unknown code is `UNKNOWN_ERROR_CODE_<n>`.
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(n)) => format!("UNKNOWN_ERROR_CODE_{n}"),
        Some(e) => upper_snake(&format!("{e:?}")),
    }
}

fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// An [`Error::Kafka`] for `code` from `broker`.
pub fn kafka_error(
    broker: &str,
    api: &'static str,
    code: i16,
    topic: Option<&str>,
    partition: Option<i32>,
    message: Option<String>,
) -> Error {
    Error::Kafka {
        broker: broker.to_string(),
        api,
        code,
        name: error_name(code).into(),
        topic: topic.map(Into::into),
        partition,
        message: message.map(Into::into),
    }
}

/// The error code of an answer from `broker` to `api`: `Ok` for 0 (NONE), else its
/// [`kafka_error`]. The one place the client turns a code in an answer into an error.
pub fn check_code(
    broker: &str,
    api: &'static str,
    code: i16,
    topic: Option<&str>,
    partition: Option<i32>,
    message: Option<&str>,
) -> Result<(), Error> {
    match code {
        0 => Ok(()),
        code => Err(kafka_error(broker, api, code, topic, partition, message.map(String::from))),
    }
}

/// Codes after which a refreshed metadata view and a retry can succeed: leadership moved or is
/// being elected, a coordinator is loading or moved, a topic just created is not everywhere yet.
pub fn retriable_code(code: i16) -> bool {
    matches!(
        code,
        3   // UNKNOWN_TOPIC_OR_PARTITION (only while metadata knows the topic: see the client)
        | 5  // LEADER_NOT_AVAILABLE
        | 6  // NOT_LEADER_OR_FOLLOWER
        | 13 // NETWORK_EXCEPTION
        | 14 // COORDINATOR_LOAD_IN_PROGRESS
        | 15 // COORDINATOR_NOT_AVAILABLE
        | 16 // NOT_COORDINATOR
        | 19 // NOT_ENOUGH_REPLICAS
        | 20 // NOT_ENOUGH_REPLICAS_AFTER_APPEND
        | 74 // FENCED_LEADER_EPOCH
        | 75 // UNKNOWN_LEADER_EPOCH
        | 78 // OFFSET_NOT_AVAILABLE
        | 100 // UNKNOWN_TOPIC_ID
    )
}

/// Whether a failed request is worth retrying within its deadline (after a metadata refresh).
pub fn retriable(e: &Error) -> bool {
    match e {
        Error::Kafka { code, .. } => retriable_code(*code),
        // The connection died or could not be opened: the broker may be restarting, or the
        // partition's leadership may have moved to another broker.
        Error::BrokerUnreachable { .. } => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kafkas() {
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(10), "MESSAGE_TOO_LARGE");
        assert_eq!(error_name(18), "RECORD_LIST_TOO_LARGE");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(9999), "UNKNOWN_ERROR_CODE_9999");
    }

    #[test]
    fn check_code_passes_none_and_names_any_other_code() {
        assert!(check_code("b:9092", "Fetch", 0, Some("t"), Some(1), None).is_ok());
        let e = check_code("b:9092", "Fetch", 6, Some("t"), Some(1), Some("moved")).unwrap_err();
        assert!(retriable(&e));
        let msg = e.to_string();
        assert!(msg.contains("NOT_LEADER_OR_FOLLOWER") && msg.contains("moved"), "{msg}");
    }

    #[test]
    fn leadership_errors_are_retried_and_size_errors_are_not() {
        assert!(retriable_code(6) && retriable_code(5) && retriable_code(3));
        assert!(!retriable_code(10) && !retriable_code(18) && !retriable_code(29));
    }
}
