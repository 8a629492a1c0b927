//! A broker's own settings in topic-level names: its static `server.properties`
//! ([`parse_server_properties`], for `--server-properties FILE`) and the mapping from broker
//! names to topic-level names ([`broker_defaults_to_topic_settings`]), which the KRaft
//! metadata's dynamic broker defaults go through too ([`crate::metadata_image`]).
//!
//! The mapping is Kafka's `ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS` (apache/kafka
//! `server-common/src/main/java/org/apache/kafka/server/config/ServerTopicConfigSynonyms.java`,
//! commit 1eb7644, 2024-10) with the conversions `KafkaConfig` applies when it builds a topic's
//! defaults (`KafkaConfig.extractLogConfigMap`): of several synonyms the first one set wins
//! (`log.retention.ms` over `log.retention.minutes` over `log.retention.hours`, `log.roll.ms`
//! over `log.roll.hours`); hours and minutes become milliseconds; a negative retention time
//! becomes `-1` (`KafkaConfig.logRetentionTimeMillis`). Values are trimmed, as Kafka's
//! `ConfigDef` trims them. Only settings present in the input appear in the output: a broker
//! setting left at its Kafka default gives the topic its Kafka default, which the topic-level
//! defaults already are.
//!
//! A `server.properties` file is validated as a broker validates it at start
//! ([`parse_server_properties`]): a refused value or a conflict is an error naming the line. The
//! KRaft dynamic defaults are not refused (a running broker wrote them): a value refused there
//! makes the settings of the topics taking it unknown ([`crate::topic_config`]).

use std::collections::BTreeMap;
use std::path::Path;

use topicfs_format::properties::parse_entries;
use topicfs_source::error::{Error, Result};

use crate::config::{LogConfig, NAMES};

/// How a broker value becomes a topic value.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Convert {
    /// As it is.
    Same,
    /// An `int` of hours into milliseconds (`ConfigSynonym.HOURS_TO_MILLISECONDS`).
    Hours,
    /// An `int` of minutes into milliseconds (`ConfigSynonym.MINUTES_TO_MILLISECONDS`).
    Minutes,
}

use Convert::{Hours, Minutes, Same};

/// Each topic-level setting with its broker synonyms, highest precedence first.
const SYNONYMS: &[(&str, &[(&str, Convert)])] = &[
    ("segment.bytes", &[("log.segment.bytes", Same)]),
    ("segment.ms", &[("log.roll.ms", Same), ("log.roll.hours", Hours)]),
    ("segment.jitter.ms", &[("log.roll.jitter.ms", Same), ("log.roll.jitter.hours", Hours)]),
    ("segment.index.bytes", &[("log.index.size.max.bytes", Same)]),
    ("flush.messages", &[("log.flush.interval.messages", Same)]),
    ("flush.ms", &[("log.flush.interval.ms", Same), ("log.flush.scheduler.interval.ms", Same)]),
    ("retention.bytes", &[("log.retention.bytes", Same)]),
    (
        "retention.ms",
        &[
            ("log.retention.ms", Same),
            ("log.retention.minutes", Minutes),
            ("log.retention.hours", Hours),
        ],
    ),
    ("max.message.bytes", &[("message.max.bytes", Same)]),
    ("index.interval.bytes", &[("log.index.interval.bytes", Same)]),
    ("delete.retention.ms", &[("log.cleaner.delete.retention.ms", Same)]),
    ("min.compaction.lag.ms", &[("log.cleaner.min.compaction.lag.ms", Same)]),
    ("max.compaction.lag.ms", &[("log.cleaner.max.compaction.lag.ms", Same)]),
    ("file.delete.delay.ms", &[("log.segment.delete.delay.ms", Same)]),
    ("min.cleanable.dirty.ratio", &[("log.cleaner.min.cleanable.ratio", Same)]),
    ("cleanup.policy", &[("log.cleanup.policy", Same)]),
    ("unclean.leader.election.enable", &[("unclean.leader.election.enable", Same)]),
    ("min.insync.replicas", &[("min.insync.replicas", Same)]),
    ("compression.type", &[("compression.type", Same)]),
    ("compression.gzip.level", &[("compression.gzip.level", Same)]),
    ("compression.lz4.level", &[("compression.lz4.level", Same)]),
    ("compression.zstd.level", &[("compression.zstd.level", Same)]),
    ("preallocate", &[("log.preallocate", Same)]),
    ("message.format.version", &[("log.message.format.version", Same)]),
    ("message.timestamp.type", &[("log.message.timestamp.type", Same)]),
    ("message.timestamp.difference.max.ms", &[("log.message.timestamp.difference.max.ms", Same)]),
    ("message.timestamp.before.max.ms", &[("log.message.timestamp.before.max.ms", Same)]),
    ("message.timestamp.after.max.ms", &[("log.message.timestamp.after.max.ms", Same)]),
    ("message.downconversion.enable", &[("log.message.downconversion.enable", Same)]),
    ("local.retention.ms", &[("log.local.retention.ms", Same)]),
    ("local.retention.bytes", &[("log.local.retention.bytes", Same)]),
];

/// A broker setting that could not be mapped: (broker name, value, line, why).
type Problem = (&'static str, String, usize, &'static str);

/// One topic-level default a broker's settings give, with the broker setting it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerDefault {
    /// The topic-level name (`retention.ms`).
    pub name: &'static str,
    /// The value in topic-level form (hours and minutes made milliseconds), trimmed.
    pub value: String,
    /// The broker setting it comes from (`log.retention.hours`).
    pub broker_name: &'static str,
    /// That setting's value as the broker holds it, trimmed.
    pub broker_value: String,
    /// The 1-based line of `server.properties` that sets it (0 where there is no file).
    pub line: usize,
}

/// Maps broker settings (each with the line setting it) to topic-level settings; the problems
/// are settings left out.
fn map_broker_settings(
    broker: &BTreeMap<String, (String, usize)>,
) -> (Vec<BrokerDefault>, Vec<Problem>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (topic_name, synonyms) in SYNONYMS {
        // Every synonym present is parsed, as Kafka parses each key at start, even one a
        // higher synonym shadows (`log.retention.hours=abc` beside `log.retention.ms=100`).
        for (name, convert) in synonyms.iter().skip(1) {
            if let Some((value, line)) = broker.get(*name)
                && matches!(convert, Hours | Minutes)
                && value.trim().parse::<i32>().is_err()
            {
                problems.push((*name, value.trim().to_string(), *line, "not an integer"));
            }
        }
        let Some((name, (value, line), convert)) = synonyms
            .iter()
            .find_map(|(name, convert)| broker.get(*name).map(|v| (*name, v, *convert)))
        else {
            continue;
        };
        let value = value.trim();
        let converted = match convert {
            Same => Ok(value.to_string()),
            Hours => value.parse::<i32>().map(|h| (i64::from(h) * 3_600_000).to_string()),
            Minutes => value.parse::<i32>().map(|m| (i64::from(m) * 60_000).to_string()),
        };
        match converted {
            Ok(mut v) => {
                // `KafkaConfig.logRetentionTimeMillis`: any negative time is "keep forever".
                if *topic_name == "retention.ms" && v.parse::<i64>().is_ok_and(|ms| ms < 0) {
                    v = "-1".to_string();
                }
                out.push(BrokerDefault {
                    name: topic_name,
                    value: v,
                    broker_name: name,
                    broker_value: value.to_string(),
                    line: *line,
                });
            }
            Err(_) => problems.push((name, value.to_string(), *line, "not an integer")),
        }
    }
    (out, problems)
}

/// Broker settings (`log.retention.hours`, `log.cleanup.policy`, ...) as the topic-level
/// settings they give topics by default (`retention.ms`, `cleanup.policy`, ...), with Kafka's
/// precedence between synonyms (see the module docs). Broker settings that are no topic
/// setting are left out; one whose value cannot be converted (`log.retention.hours=two`) is
/// left out with a warning (Kafka itself would not start with it).
pub fn broker_defaults_to_topic_settings(
    broker: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let lined = broker.iter().map(|(k, v)| (k.clone(), (v.clone(), 0))).collect();
    let (out, problems) = map_broker_settings(&lined);
    for (name, value, _, why) in problems {
        log::warn!("broker setting {name}={value} ignored: {why}");
    }
    out.into_iter().map(|d| (d.name.to_string(), d.value)).collect()
}

/// Parses the text of a broker's `server.properties` file `file` (Java properties syntax; a later line setting the same
/// name wins, as in `java.util.Properties`) into the topic-level defaults it gives topics
/// ([`broker_defaults_to_topic_settings`]), validated as the broker validates them at start:
/// each value with the rules of the topic setting it maps to ([`LogConfig::set`]), then the
/// rules between them ([`LogConfig::conflict`]). Broker settings that map to no topic setting
/// topicfs knows (`num.io.threads`, `log.message.format.version`) are not validated.
/// [`Error::InvalidInput`] naming the file, the line, the broker setting and the rule when the
/// text cannot be parsed or a value is refused: a broker would not start with it. (Reading the
/// file is the caller's: this crate does no I/O.)
pub fn parse_server_properties(text: &str, file: &Path) -> Result<Vec<BrokerDefault>> {
    let entries = parse_entries(text)
        .map_err(|e| Error::InvalidInput(format!("{}: byte {}: {e}", file.display(), e.at)))?;
    let broker: BTreeMap<String, (String, usize)> =
        entries.into_iter().map(|p| (p.key, (p.value, p.line))).collect();
    let (out, problems) = map_broker_settings(&broker);
    if let Some((name, value, line, why)) = problems.into_iter().next() {
        return Err(Error::InvalidInput(format!(
            "{}: line {line}: {name}={value}: {why}",
            file.display()
        )));
    }
    let mut config = LogConfig::default();
    for default in out.iter().filter(|d| NAMES.contains(&d.name)) {
        config.set(default.name, &default.value).map_err(|e| {
            Error::InvalidInput(format!(
                "{}: line {}: {}={}: {}",
                file.display(),
                default.line,
                default.broker_name,
                default.broker_value,
                reason(e)
            ))
        })?;
    }
    if let Some(conflict) = config.conflict() {
        let at: Vec<String> = conflict
            .names
            .iter()
            .filter_map(|n| out.iter().find(|d| d.name == *n))
            .map(|d| format!("{}={} on line {}", d.broker_name, d.broker_value, d.line))
            .collect();
        return Err(Error::InvalidInput(format!(
            "{}: {} ({})",
            file.display(),
            conflict.rule,
            at.join(", ")
        )));
    }
    Ok(out)
}

/// What an error says, without the "invalid input: " its kind adds.
pub fn reason(e: Error) -> String {
    match e {
        Error::InvalidInput(what) => what,
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's text parsed, as the CLI does after reading it.
    fn read_server_properties(file: &Path) -> Result<Vec<BrokerDefault>> {
        parse_server_properties(&std::fs::read_to_string(file).unwrap(), file)
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn retention_ms_wins_over_minutes_over_hours() {
        let all = map(&[
            ("log.retention.hours", "1"),
            ("log.retention.minutes", "2"),
            ("log.retention.ms", "3"),
        ]);
        assert_eq!(broker_defaults_to_topic_settings(&all), map(&[("retention.ms", "3")]));
        let no_ms = map(&[("log.retention.hours", "1"), ("log.retention.minutes", "2")]);
        assert_eq!(broker_defaults_to_topic_settings(&no_ms), map(&[("retention.ms", "120000")]));
        let hours = map(&[("log.retention.hours", "168")]);
        assert_eq!(
            broker_defaults_to_topic_settings(&hours),
            map(&[("retention.ms", "604800000")])
        );
        // Any negative time keeps forever, whichever synonym says it.
        for (k, v) in [("log.retention.hours", "-5"), ("log.retention.ms", "-2")] {
            assert_eq!(
                broker_defaults_to_topic_settings(&map(&[(k, v)])),
                map(&[("retention.ms", "-1")])
            );
        }
    }

    #[test]
    fn roll_and_jitter_ms_win_over_hours() {
        let both =
            map(&[("log.roll.hours", "2"), ("log.roll.ms", "5"), ("log.roll.jitter.hours", "1")]);
        assert_eq!(
            broker_defaults_to_topic_settings(&both),
            map(&[("segment.ms", "5"), ("segment.jitter.ms", "3600000")])
        );
    }

    #[test]
    fn broker_names_map_to_topic_names_and_others_are_left_out() {
        let broker = map(&[
            ("log.segment.bytes", " 1048576 "),
            ("log.cleanup.policy", "compact,delete"),
            ("log.cleaner.delete.retention.ms", "1000"),
            ("log.cleaner.min.compaction.lag.ms", "2000"),
            ("log.cleaner.max.compaction.lag.ms", "3000"),
            ("log.cleaner.min.cleanable.ratio", "0.25"),
            ("message.max.bytes", "2097152"),
            ("log.message.timestamp.type", "LogAppendTime"),
            ("compression.type", "zstd"),
            ("log.index.interval.bytes", "8192"),
            ("log.index.size.max.bytes", "65536"),
            ("log.retention.bytes", "-1"),
            ("log.message.downconversion.enable", "false"),
            ("min.insync.replicas", "2"),
            ("unclean.leader.election.enable", "true"),
            ("log.segment.delete.delay.ms", "0"),
            ("log.flush.scheduler.interval.ms", "1000"),
            ("node.id", "1"),
            ("log.dirs", "/var/lib/kafka"),
            ("log.cleaner.threads", "2"),
        ]);
        assert_eq!(
            broker_defaults_to_topic_settings(&broker),
            map(&[
                ("segment.bytes", "1048576"),
                ("cleanup.policy", "compact,delete"),
                ("delete.retention.ms", "1000"),
                ("min.compaction.lag.ms", "2000"),
                ("max.compaction.lag.ms", "3000"),
                ("min.cleanable.dirty.ratio", "0.25"),
                ("max.message.bytes", "2097152"),
                ("message.timestamp.type", "LogAppendTime"),
                ("compression.type", "zstd"),
                ("index.interval.bytes", "8192"),
                ("segment.index.bytes", "65536"),
                ("retention.bytes", "-1"),
                ("message.downconversion.enable", "false"),
                ("min.insync.replicas", "2"),
                ("unclean.leader.election.enable", "true"),
                ("file.delete.delay.ms", "0"),
                ("flush.ms", "1000"),
            ])
        );
    }

    #[test]
    fn an_unconvertible_hours_value_is_left_out_and_refused_in_a_file() {
        let bad = map(&[("log.retention.hours", "a week"), ("log.segment.bytes", "100")]);
        assert_eq!(broker_defaults_to_topic_settings(&bad), map(&[("segment.bytes", "100")]));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.properties");
        std::fs::write(&file, "node.id=1\nlog.retention.hours=a week\n").unwrap();
        let err = read_server_properties(&file).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        assert!(err.to_string().contains("log.retention.hours"), "{err}");
        assert!(err.to_string().contains("server.properties: line 2:"), "{err}");
        // Shadowed by a higher synonym, still parsed (a probe saw them taken), as Kafka
        // parses every key.
        for text in [
            "log.retention.ms=100\nlog.retention.hours=abc\n",
            "log.retention.ms=100\nlog.retention.minutes=1.5\n",
            "log.roll.ms=100\nlog.roll.hours=abc\n",
            "log.roll.jitter.ms=1\nlog.roll.jitter.hours=x\n",
        ] {
            std::fs::write(&file, text).unwrap();
            let err = read_server_properties(&file).unwrap_err().to_string();
            assert!(err.contains("line 2:") && err.contains("not an integer"), "{text}: {err}");
        }
        std::fs::write(&file, "log.retention.ms=100\nlog.retention.hours=2\n").unwrap();
        assert_eq!(read_map(&file).unwrap()["retention.ms"], "100");
    }

    /// The file's topic-level defaults as a map (what the mount layers).
    fn read_map(file: &Path) -> Result<BTreeMap<String, String>> {
        Ok(read_server_properties(file)?
            .into_iter()
            .map(|d| (d.name.to_string(), d.value))
            .collect())
    }

    #[test]
    fn every_value_is_validated_as_its_topic_setting_naming_file_line_and_rule() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.properties");
        for (line, rule) in [
            ("log.segment.bytes=abc", "for segment.bytes: not an integer"),
            ("log.retention.ms=abc", "for retention.ms: not an integer"),
            ("log.cleanup.policy=foo", "must be delete, compact or compact,delete"),
            ("message.max.bytes=-3", "for max.message.bytes: must be at least 0"),
            ("log.segment.bytes=13", "must be at least 14"),
            ("log.cleaner.min.cleanable.ratio=2", "must be between 0 and 1"),
            ("min.insync.replicas=0", "must be at least 1"),
            ("log.retention.bytes=-2", "must be -1 (no limit) or >= 0"),
            ("compression.type=brotli", "must be one of producer"),
        ] {
            std::fs::write(&file, format!("# broker\nnode.id=1\n\n{line}\n")).unwrap();
            let err = read_server_properties(&file).unwrap_err().to_string();
            let (name, value) = line.split_once('=').unwrap();
            assert!(err.contains(&format!("{}: line 4: ", file.display())), "{line}: {err}");
            assert!(err.contains(&format!("{name}={value}")), "{line}: {err}");
            assert!(err.contains(rule), "{line}: {err}");
        }
        // A later line setting the same name wins, as in java.util.Properties.
        std::fs::write(&file, "log.segment.bytes=abc\nlog.segment.bytes=1048576\n").unwrap();
        assert_eq!(read_map(&file).unwrap(), map(&[("segment.bytes", "1048576")]));
        // Broker settings topicfs does not interpret are not validated.
        std::fs::write(
            &file,
            "num.io.threads=many\nlog.message.format.version=ancient\nlog.cleaner.threads=x\n",
        )
        .unwrap();
        assert_eq!(read_map(&file).unwrap(), map(&[("message.format.version", "ancient")]));
    }

    #[test]
    fn settings_that_conflict_in_the_file_are_refused_naming_both_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.properties");
        std::fs::write(
            &file,
            "log.cleaner.min.compaction.lag.ms=10\nnode.id=1\nlog.cleaner.max.compaction.lag.ms=5\n",
        )
        .unwrap();
        let err = read_server_properties(&file).unwrap_err().to_string();
        assert!(err.contains("min.compaction.lag.ms (10) must not be above"), "{err}");
        assert!(err.contains("log.cleaner.min.compaction.lag.ms=10 on line 1"), "{err}");
        assert!(err.contains("log.cleaner.max.compaction.lag.ms=5 on line 3"), "{err}");
        std::fs::write(
            &file,
            "log.cleaner.min.compaction.lag.ms=5\nlog.cleaner.max.compaction.lag.ms=5\n",
        )
        .unwrap();
        assert!(read_server_properties(&file).is_ok());
    }

    #[test]
    fn server_properties_file_is_read_in_java_syntax_with_kafkas_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.properties");
        std::fs::write(
            &file,
            "# a broker's file\nprocess.roles=broker\nnode.id=1\n\
             log.retention.hours=24\nlog.retention.minutes : 90\n\
             log.cleanup.policy=compact\\\n  ,delete\nlog.segment.bytes 1048576\n\
             log.roll.hours=1\n",
        )
        .unwrap();
        assert_eq!(
            read_map(&file).unwrap(),
            map(&[
                ("retention.ms", "5400000"),
                ("cleanup.policy", "compact,delete"),
                ("segment.bytes", "1048576"),
                ("segment.ms", "3600000"),
            ])
        );
    }
}
