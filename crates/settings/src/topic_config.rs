//! A data dir's per-topic settings: the layers a topic's effective [`LogConfig`] is resolved
//! from, and the file that keeps the overrides set through the mount.
//!
//! **Precedence**, highest first ([`ConfigSource`]): the topic's override (the `config` file,
//! kept in [`TOPIC_CONFIG_FILE`]) > the broker's override for the topic (KRaft, or the
//! engine's own for internal topics such as `__consumer_offsets`) > the broker's dynamic
//! default > the mount's `--config` > `server.properties` > Kafka's default. Each setting is
//! resolved on its own: a topic overriding `retention.ms` still takes `segment.bytes` from the
//! mount.
//!
//! **Known settings.** A topic's settings are known when it has an entry in
//! [`TOPIC_CONFIG_FILE`] not marked `unknown` (topics created through the mount get one, empty,
//! at creation; [`ConfigChange::MakeKnown`] makes one), when the broker's metadata lists it
//! ([`BrokerSettings::topics`]), or when it is an internal topic the engine configures. Only
//! then may retention delete by time or size, or the cleaner compact ([`Resolved::known`]);
//! the settings only they use ([`RETENTION_ONLY`]) are shown not applied otherwise. Overrides
//! set on a topic whose settings are unknown, without `MakeKnown`, are kept and applied (rolls,
//! appends) under an entry marked `unknown`: deciding that a topic's settings are what the
//! layers say is a deliberate act (the `config` file's `cleanup.policy` line), never a side
//! effect of another change. A value a broker layer holds that Kafka's validation refuses
//! makes the settings unknown too: guessing around it could delete what the broker keeps.
//!
//! **The file.** `<data dir>/topicfs-topic-config`, a plain file at the root of the data dir.
//! A Kafka broker started on the same directory ignores it: `LogManager.loadLogs` (apache/kafka
//! `core/src/main/scala/kafka/log/LogManager.scala`, 3.x and 4.x) loads only the entries that
//! are directories (`dir.listFiles.filter(logDir => logDir.isDirectory && ...)`) and
//! parses each of those as `<topic>-<partition>`, failing the log dir on a directory that is
//! not one, so a directory at the root would break the broker while a file is skipped. The
//! same holds for its `.tmp` sibling. Written as the checkpoints are: `<name>.tmp`, fsync,
//! rename over, fsync of the directory, so a crash leaves the old file or the new one.
//!
//! ```text
//! # topicfs topic settings: <topic> [unknown] [name=value ...]; a Kafka broker ignores this file
//! version 1
//! orders
//! table cleanup.policy=compact retention.ms=-1
//! copied unknown segment.bytes=1048576
//! ```
//!
//! Values are stored as [`LogConfig::get`] renders them, which never contains whitespace.

use std::collections::{BTreeMap, BTreeSet};

use topicfs_format::file_name::validate_topic_name;
use topicfs_source::error::{Error, Result};
use topicfs_source::{ConfigChange, ConfigEntry, ConfigSource};

use crate::config::{BrokerSettings, LogConfig, NAMES, RETENTION_ONLY};

/// The file at the data dir's root keeping the overrides set through the mount.
pub const TOPIC_CONFIG_FILE: &str = "topicfs-topic-config";
/// The header line of [`TOPIC_CONFIG_FILE`]'s only version.
const VERSION_LINE: &str = "version 1";

/// Settings by name, as given (a layer).
pub type Settings = BTreeMap<String, String>;

/// The overrides set through the mount, as in [`TOPIC_CONFIG_FILE`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// Each topic with an entry, with its overrides (possibly none).
    pub topics: BTreeMap<String, Settings>,
    /// The topics among `topics` marked `unknown`: overrides set while their settings were
    /// unknown, without [`ConfigChange::MakeKnown`]; their entry does not make them known.
    pub unknown: BTreeSet<String>,
}

/// The word marking an entry of [`TOPIC_CONFIG_FILE`] whose topic's settings are unknown.
const UNKNOWN_WORD: &str = "unknown";

/// Every layer of a data dir's topic settings; see the module doc.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicSettings {
    /// The mount's `--config` (and named flags): defaults for every topic.
    pub mount_defaults: Settings,
    /// The engine's own settings for internal topics (`__consumer_offsets`), shown as the
    /// broker's override of the topic, as a broker creates it with them.
    pub internal: BTreeMap<String, Settings>,
    /// What the broker holds (the storage engine sets it from `server.properties` and the KRaft
    /// metadata).
    pub broker: BrokerSettings,
    /// The overrides set through the mount, as in [`TOPIC_CONFIG_FILE`]; a topic with an entry
    /// (even empty) not marked unknown has known settings.
    pub overrides: Overrides,
}

/// A topic's effective settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The effective configuration.
    pub config: LogConfig,
    /// Every setting, sorted by name, with where its value comes from.
    pub entries: Vec<ConfigEntry>,
    /// Whether the settings are known (see the module doc): retention by time and size and
    /// compaction are allowed only then (`entries` of [`RETENTION_ONLY`] are not applied
    /// otherwise).
    pub known: bool,
    /// Values of broker layers refused by Kafka's validation (each makes `known` false).
    pub problems: Vec<String>,
}

impl TopicSettings {
    /// Whether `topic` has an entry that makes its settings known in some layer that names
    /// topics.
    pub fn has_entry(&self, topic: &str) -> bool {
        (self.overrides.topics.contains_key(topic) && !self.overrides.unknown.contains(topic))
            || self.broker.topics.contains_key(topic)
            || self.internal.contains_key(topic)
    }

    /// The effective settings of `topic`: each setting from the highest layer that holds a
    /// valid value for it.
    pub fn resolve(&self, topic: &str) -> Resolved {
        let empty = Settings::new();
        let layers: [(ConfigSource, Vec<&Settings>); 5] = [
            (ConfigSource::BrokerStatic, vec![&self.broker.static_defaults]),
            (ConfigSource::MountDefault, vec![&self.mount_defaults]),
            (ConfigSource::BrokerDefault, vec![&self.broker.dynamic_defaults]),
            (
                ConfigSource::BrokerTopic,
                vec![
                    self.internal.get(topic).unwrap_or(&empty),
                    self.broker.topics.get(topic).unwrap_or(&empty),
                ],
            ),
            (ConfigSource::TopicOverride, vec![self.overrides.topics.get(topic).unwrap_or(&empty)]),
        ];
        let mut config = LogConfig::default();
        let mut sources: BTreeMap<&str, ConfigSource> = BTreeMap::new();
        // Per setting, the refusal of the highest layer holding it, if that one was refused: a
        // refused value shadowed by a valid one above it (a topic's own override) decides
        // nothing.
        let mut refused: BTreeMap<&str, Option<String>> = BTreeMap::new();
        for (source, maps) in layers {
            for (name, value) in maps.into_iter().flatten() {
                let Some(known_name) = NAMES.iter().copied().find(|n| n == name) else {
                    // A broker's metadata may hold settings of other Kafka versions
                    // (`message.downconversion.enable`): they decide nothing here.
                    log::debug!("topic {topic}: ignoring unknown setting {name} ({source:?})");
                    continue;
                };
                let mut trial = config.clone();
                match trial.set(name, value) {
                    Ok(()) => {
                        config = trial;
                        sources.insert(known_name, source);
                        refused.insert(known_name, None);
                    }
                    Err(e) => {
                        let why = crate::server_properties::reason(e);
                        let problem = format!("{} setting: {why}", source.as_str());
                        refused.insert(known_name, Some(problem));
                    }
                }
            }
        }
        let mut problems: Vec<String> = refused.into_values().flatten().collect();
        if let Err(e) = config.validate() {
            problems.push(e.to_string());
        }
        let known = self.has_entry(topic) && problems.is_empty();
        let entries = config
            .settings()
            .into_iter()
            .map(|(name, value)| ConfigEntry {
                name: name.to_string(),
                value: Some(value),
                source: sources.get(name).copied().unwrap_or(ConfigSource::KafkaDefault),
                applied: known || !RETENTION_ONLY.contains(&name),
            })
            .collect();
        Resolved { config, entries, known, problems }
    }

    /// `topic`'s overrides after `changes`, validated as Kafka validates an
    /// IncrementalAlterConfigs (each value, then the rules between settings on the result);
    /// values stored in their rendered form. `InvalidInput` naming the setting and the rule.
    pub fn changed_overrides(&self, topic: &str, changes: &[ConfigChange]) -> Result<Settings> {
        let mut overrides = self.overrides.topics.get(topic).cloned().unwrap_or_default();
        for change in changes {
            match change {
                ConfigChange::Set { name, value } => {
                    let mut probe = LogConfig::default();
                    probe.set(name, value)?;
                    let rendered = probe.get(name).unwrap_or_else(|| value.trim().to_string());
                    overrides.insert(name.clone(), rendered);
                }
                ConfigChange::Remove { name } => {
                    if !NAMES.contains(&name.as_str()) {
                        return Err(Error::InvalidInput(format!(
                            "unknown topic setting {name:?} (known: {})",
                            NAMES.join(", ")
                        )));
                    }
                    overrides.remove(name);
                }
                ConfigChange::MakeKnown => {}
            }
        }
        let mut candidate = self.clone();
        candidate.overrides.topics.insert(topic.to_string(), overrides.clone());
        candidate.resolve(topic).config.validate()?;
        Ok(overrides)
    }

    /// Every topic's overrides after `changes` to `topic`'s ([`TopicSettings::changed_overrides`],
    /// validated the same way), with `topic` known afterwards when it is known now or `changes`
    /// hold [`ConfigChange::MakeKnown`]; otherwise its overrides are kept marked unknown (and
    /// its entry dropped when none is left), so that no change but `MakeKnown` makes a topic's
    /// settings known.
    pub fn changed(&self, topic: &str, changes: &[ConfigChange]) -> Result<Overrides> {
        let settings = self.changed_overrides(topic, changes)?;
        let make_known = changes.iter().any(|c| matches!(c, ConfigChange::MakeKnown));
        let mut out = self.overrides.clone();
        if self.has_entry(topic) || make_known {
            out.unknown.remove(topic);
            if !settings.is_empty() || make_known || out.topics.contains_key(topic) {
                out.topics.insert(topic.to_string(), settings);
            }
        } else if settings.is_empty() {
            out.topics.remove(topic);
            out.unknown.remove(topic);
        } else {
            out.topics.insert(topic.to_string(), settings);
            out.unknown.insert(topic.to_string());
        }
        Ok(out)
    }
}

/// The settings of `config` that differ from `base`, rendered: the layer a [`LogConfig`] built
/// from `base` by `set` calls stands for (values equal to `base`'s are indistinguishable).
pub fn differing_settings(config: &LogConfig, base: &LogConfig) -> Settings {
    config
        .settings()
        .into_iter()
        .filter(|(name, value)| base.get(name).as_ref() != Some(value))
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

/// [`TOPIC_CONFIG_FILE`]'s text for `overrides`.
pub fn format_topic_config_file(overrides: &Overrides) -> String {
    let mut text = String::from(
        "# topicfs topic settings: <topic> [unknown] [name=value ...]; a Kafka broker ignores \
         this file\n",
    );
    text.push_str(VERSION_LINE);
    text.push('\n');
    for (topic, settings) in &overrides.topics {
        text.push_str(topic);
        if overrides.unknown.contains(topic) {
            text.push(' ');
            text.push_str(UNKNOWN_WORD);
        }
        for (name, value) in settings {
            text.push(' ');
            text.push_str(name);
            text.push('=');
            text.push_str(value);
        }
        text.push('\n');
    }
    text
}

/// Parses [`TOPIC_CONFIG_FILE`]: every topic name and setting validated as at write time.
/// `Err((byte position of the line, what is wrong))`.
pub fn parse_topic_config_file(text: &str) -> std::result::Result<Overrides, (u64, String)> {
    let mut out = Overrides::default();
    let mut version_seen = false;
    let mut position = 0u64;
    for line in text.split_inclusive('\n') {
        let at = position;
        position += line.len() as u64;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !version_seen {
            if line != VERSION_LINE {
                return Err((at, format!("expected {VERSION_LINE:?}, found {line:?}")));
            }
            version_seen = true;
            continue;
        }
        let mut words = line.split_whitespace().peekable();
        let Some(topic) = words.next() else { continue };
        validate_topic_name(topic).map_err(|why| (at, format!("topic {topic:?}: {why}")))?;
        if words.next_if_eq(&UNKNOWN_WORD).is_some() {
            out.unknown.insert(topic.to_string());
        }
        let mut settings = Settings::new();
        let mut probe = LogConfig::default();
        for word in words {
            let (name, value) = word.split_once('=').ok_or_else(|| {
                (at, format!("topic {topic}: expected name=value, found {word:?}"))
            })?;
            probe.set(name, value).map_err(|e| (at, format!("topic {topic}: {e}")))?;
            settings.insert(name.to_string(), value.to_string());
        }
        if out.topics.insert(topic.to_string(), settings).is_some() {
            return Err((at, format!("topic {topic} listed twice")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn entry<'a>(r: &'a Resolved, name: &str) -> &'a ConfigEntry {
        r.entries.iter().find(|e| e.name == name).unwrap()
    }

    #[test]
    fn each_setting_comes_from_the_highest_layer_holding_it() {
        let mut s = TopicSettings {
            mount_defaults: settings(&[("retention.ms", "4"), ("segment.bytes", "4000")]),
            ..TopicSettings::default()
        };
        s.broker.static_defaults =
            settings(&[("retention.ms", "5"), ("segment.bytes", "5000"), ("segment.ms", "5")]);
        s.broker.dynamic_defaults = settings(&[("retention.ms", "3"), ("segment.jitter.ms", "3")]);
        s.broker.topics.insert("t".into(), settings(&[("retention.ms", "2"), ("flush.ms", "2")]));
        s.overrides.topics.insert("t".into(), settings(&[("retention.ms", "1")]));
        let r = s.resolve("t");
        assert!(r.known);
        assert_eq!(r.config.retention_ms, Some(1));
        for (name, value, source) in [
            ("retention.ms", "1", ConfigSource::TopicOverride),
            ("flush.ms", "2", ConfigSource::BrokerTopic),
            ("segment.jitter.ms", "3", ConfigSource::BrokerDefault),
            ("segment.bytes", "4000", ConfigSource::MountDefault),
            ("segment.ms", "5", ConfigSource::BrokerStatic),
            ("cleanup.policy", "delete", ConfigSource::KafkaDefault),
        ] {
            let e = entry(&r, name);
            assert_eq!((e.value.as_deref(), e.source), (Some(value), source), "{name}");
        }
        // Another topic: no entry anywhere, so unknown; the defaults' layers still apply.
        let u = s.resolve("u");
        assert!(!u.known);
        assert_eq!(entry(&u, "retention.ms").source, ConfigSource::BrokerDefault);
    }

    #[test]
    fn an_invalid_broker_value_makes_the_settings_unknown_and_falls_back() {
        let mut s = TopicSettings::default();
        s.broker.topics.insert(
            "t".into(),
            settings(&[("retention.ms", "-7"), ("message.downconversion.enable", "true")]),
        );
        let r = s.resolve("t");
        assert!(!r.known, "{r:?}");
        assert_eq!(r.problems.len(), 1, "unknown names are ignored: {:?}", r.problems);
        assert_eq!(entry(&r, "retention.ms").source, ConfigSource::KafkaDefault);
    }

    #[test]
    fn a_refused_broker_default_counts_only_for_topics_that_take_it() {
        let mut s = TopicSettings::default();
        s.broker.dynamic_defaults = settings(&[("segment.bytes", "abc")]);
        s.overrides.topics.insert("plain".into(), settings(&[("retention.ms", "1000")]));
        s.overrides.topics.insert("own".into(), settings(&[("segment.bytes", "1048576")]));
        s.broker.topics.insert("broker-own".into(), settings(&[("segment.bytes", "2048")]));
        let plain = s.resolve("plain");
        assert!(!plain.known, "its segment.bytes would be the refused default: {plain:?}");
        assert!(plain.problems[0].contains("segment.bytes"), "{:?}", plain.problems);
        for topic in ["own", "broker-own"] {
            let r = s.resolve(topic);
            assert!(r.known && r.problems.is_empty(), "{topic}: {:?}", r.problems);
        }
        // A refused value above a valid one still counts (the valid one is not what was meant).
        s.overrides.topics.insert("own".into(), settings(&[("segment.bytes", "x")]));
        assert!(!s.resolve("own").known);
    }

    #[test]
    fn changes_are_validated_and_stored_rendered() {
        let mut s = TopicSettings::default();
        s.overrides.topics.insert("t".into(), settings(&[("retention.ms", "1")]));
        let set = |n: &str, v: &str| ConfigChange::Set { name: n.into(), value: v.into() };
        let o = s
            .changed_overrides(
                "t",
                &[
                    set("cleanup.policy", "delete , compact"),
                    ConfigChange::Remove { name: "retention.ms".into() },
                ],
            )
            .unwrap();
        assert_eq!(o, settings(&[("cleanup.policy", "compact,delete")]));
        let e = s.changed_overrides("t", &[set("segment.bytes", "1")]).unwrap_err();
        assert!(e.to_string().contains("segment.bytes"), "{e}");
        let e =
            s.changed_overrides("t", &[ConfigChange::Remove { name: "nope".into() }]).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        s.broker.topics.insert("t".into(), settings(&[("max.compaction.lag.ms", "10")]));
        let e = s.changed_overrides("t", &[set("min.compaction.lag.ms", "20")]).unwrap_err();
        assert!(e.to_string().contains("max.compaction.lag.ms"), "{e}");
    }

    /// Only `MakeKnown` makes a topic's settings known: other changes of a topic whose settings
    /// are unknown are kept marked unknown (their entry dropped when none is left); a known
    /// topic stays known whatever changes.
    #[test]
    fn only_make_known_makes_a_topics_settings_known() {
        let mut s = TopicSettings::default();
        let set = |n: &str, v: &str| ConfigChange::Set { name: n.into(), value: v.into() };
        let o = s.changed("t", &[]).unwrap();
        assert_eq!(o, Overrides::default(), "no change, no entry");
        let o = s.changed("t", &[set("segment.bytes", "1000")]).unwrap();
        assert_eq!(o.topics["t"], settings(&[("segment.bytes", "1000")]));
        assert!(o.unknown.contains("t"));
        s.overrides = o;
        let r = s.resolve("t");
        assert!(!r.known);
        assert_eq!(r.config.segment_bytes, 1000, "the override applies");
        assert!(!entry(&r, "retention.ms").applied && !entry(&r, "cleanup.policy").applied);
        assert!(entry(&r, "segment.bytes").applied);
        let o = s.changed("t", &[ConfigChange::Remove { name: "segment.bytes".into() }]).unwrap();
        assert_eq!(o, Overrides::default(), "an unknown topic's last override removed");
        let o =
            s.changed("t", &[set("cleanup.policy", "delete"), ConfigChange::MakeKnown]).unwrap();
        assert!(o.unknown.is_empty());
        assert_eq!(
            o.topics["t"],
            settings(&[("cleanup.policy", "delete"), ("segment.bytes", "1000")])
        );
        s.overrides = o;
        assert!(s.resolve("t").known);
        assert!(s.resolve("t").entries.iter().all(|e| e.applied));
        let o = s.changed("t", &[ConfigChange::Remove { name: "cleanup.policy".into() }]).unwrap();
        let o = TopicSettings { overrides: o, ..s.clone() }
            .changed("t", &[ConfigChange::Remove { name: "segment.bytes".into() }])
            .unwrap();
        assert_eq!(o.topics["t"], Settings::new(), "a known topic keeps its empty entry");
        assert!(o.unknown.is_empty());
    }

    #[test]
    fn the_file_round_trips_and_refuses_damage_naming_the_line() {
        let mut o = Overrides::default();
        o.topics.insert("orders".to_string(), Settings::new());
        o.topics.insert("a.b-c_d".to_string(), settings(&[("cleanup.policy", "compact,delete")]));
        o.topics.insert("copied".to_string(), settings(&[("segment.bytes", "1000")]));
        o.unknown.insert("copied".to_string());
        let text = format_topic_config_file(&o);
        assert!(text.lines().any(|l| l == "copied unknown segment.bytes=1000"), "{text}");
        assert_eq!(parse_topic_config_file(&text).unwrap(), o);
        assert_eq!(parse_topic_config_file("").unwrap(), Overrides::default());
        let bad = text.replace("compact,delete", "sometimes");
        let (at, why) = parse_topic_config_file(&bad).unwrap_err();
        assert_eq!(at as usize, bad.find("a.b-c_d").unwrap());
        assert!(why.contains("cleanup.policy"), "{why}");
        assert!(parse_topic_config_file("orders\n").unwrap_err().1.contains("version 1"));
        let twice = format!("{VERSION_LINE}\nt\nt\n");
        assert!(parse_topic_config_file(&twice).unwrap_err().1.contains("twice"));
    }
}
