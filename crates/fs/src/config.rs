//! `<topic>/config`: the topic's effective settings, and changes to its overrides.
//!
//! Reading lists every setting, sorted by name, one `name=value # <source>` per line, the
//! source in [`ConfigSource::as_str`]'s words (`override`, `broker-override`,
//! `broker-default`, `mount-default`, `server-properties`, `kafka-default`). Writing takes
//! lines:
//! - `name=value` sets the topic's override of `name`; `name=` removes it;
//! - a line carrying a ` # <comment>` after the value (what reading shows) changes nothing
//!   when the value is the one the topic has now, so `cat config` written back leaves every
//!   setting with the layer it comes from; with another value it is a `name=value` line;
//! - blank lines and lines starting with `#` are skipped.
//!
//! The complete lines of one `write()` (and the last partial line, at `close()`) are one
//! change, all or nothing, through [`TopicSource::alter_topic_config`]: the backend validates
//! (`EINVAL` naming the setting and the rule, logged), and nothing is changed then. Any
//! accepted write with a setting line, even one changing nothing, makes the topic's settings
//! known to the backend.

use std::sync::Mutex;

use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{ConfigChange, ConfigEntry, ConfigSource, TopicSource};

use super::TopicFs;

/// The text of a `config` file for `entries`.
pub fn config_text(entries: &[ConfigEntry]) -> String {
    let mut text = String::new();
    for entry in entries {
        text.push_str(&entry.name);
        text.push('=');
        text.push_str(entry.value.as_deref().unwrap_or(""));
        text.push_str(" # ");
        text.push_str(ConfigSource::as_str(entry.source));
        text.push('\n');
    }
    text
}

/// The changes `text` (whole lines) asks for, given the topic's settings now; `None` when it
/// holds no setting line. `InvalidInput` naming the line for a line that is not a setting.
pub fn parse_config_lines(
    text: &str,
    current: &[ConfigEntry],
) -> Result<Option<Vec<ConfigChange>>> {
    let mut changes = Vec::new();
    let mut any = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (setting, commented) = match line.split_once(" #") {
            Some((setting, _)) => (setting.trim(), true),
            None => (line, false),
        };
        let Some((name, value)) = setting.split_once('=') else {
            return Err(Error::InvalidInput(format!(
                "line {}: expected name=value (or name= to remove an override), found {line:?}",
                n + 1
            )));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return Err(Error::InvalidInput(format!("line {}: no setting name", n + 1)));
        }
        any = true;
        if commented {
            let now = current.iter().find(|e| e.name == name);
            if now.is_some_and(|e| e.value.as_deref().unwrap_or("") == value) {
                continue;
            }
        }
        changes.push(if value.is_empty() {
            ConfigChange::Remove { name: name.to_string() }
        } else {
            ConfigChange::Set { name: name.to_string(), value: value.to_string() }
        });
    }
    Ok(any.then_some(changes))
}

/// An open `config` file: its text at `open`, and the partial last line written so far.
#[derive(Debug)]
pub struct ConfigHandle {
    pub topic: String,
    pub text: Vec<u8>,
    pending: Mutex<Vec<u8>>,
}

impl ConfigHandle {
    pub fn new(topic: String, text: Vec<u8>) -> ConfigHandle {
        ConfigHandle { topic, text, pending: Mutex::new(Vec::new()) }
    }
}

impl TopicFs {
    /// The text of `topic`'s `config` file now.
    pub(super) fn config_text(&self, topic: &str) -> Result<String> {
        Ok(config_text(&self.source.topic_config(topic)?))
    }

    /// One `write()` to a `config` file: its complete lines (after what earlier writes left)
    /// are applied as one change; a partial last line waits for the next write or `close()`.
    pub(super) fn config_write(&self, handle: &ConfigHandle, data: &[u8]) -> Result<()> {
        let text = {
            let mut pending = lock(&handle.pending);
            pending.extend_from_slice(data);
            let Some(end) = pending.iter().rposition(|b| *b == b'\n') else { return Ok(()) };
            pending.drain(..=end).collect::<Vec<u8>>()
        };
        apply(self.source.as_ref(), &handle.topic, &text)
    }

    /// `close()` of a `config` file: applies the partial last line, if any.
    pub(super) fn config_flush(&self, handle: &ConfigHandle) -> Result<()> {
        let text = std::mem::take(&mut *lock(&handle.pending));
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        apply(self.source.as_ref(), &handle.topic, &text)
    }
}

/// Applies the lines `text` to `topic`'s overrides, logging a refusal with the setting and rule.
fn apply(source: &dyn TopicSource, topic: &str, text: &[u8]) -> Result<()> {
    let result = std::str::from_utf8(text)
        .map_err(|_| Error::InvalidInput("not UTF-8 text".to_string()))
        .and_then(|text| {
            let current = source.topic_config(topic)?;
            match parse_config_lines(text, &current)? {
                Some(changes) => source.alter_topic_config(topic, &changes),
                None => Ok(()),
            }
        });
    if let Err(e) = &result {
        log::warn!("{topic}/config: {e}; nothing changed");
    }
    result
}
