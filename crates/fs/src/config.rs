//! `<topic>/config`: the topic's effective settings, and changes to its overrides.
//!
//! Reading lists every setting, sorted by name, one `name=value # <source>` per line, the
//! source in [`ConfigSource::as_str`]'s words (`override`, `broker-override`,
//! `broker-default`, `mount-default`, `server-properties`, `kafka-default`). On a topic whose
//! settings the source does not know, the text starts with [`UNKNOWN_HEADER`] and each setting
//! it does not apply ([`ConfigEntry::applied`]) ends with `; not applied: settings unknown`.
//!
//! Writing takes lines:
//! - `name=value` sets the topic's override of `name`; `name=` removes it;
//! - a line carrying a ` # <comment>` after the value (what reading shows) is no setting line
//!   at all when the value is the one the topic has now, so `cat config` written back changes
//!   nothing; with another value it is refused (`EINVAL`): it only confirms what reading
//!   shows, so a saved copy written back after the settings changed pins nothing;
//! - a `cleanup.policy` line with a value and without a comment also states the topic's settings
//!   ([`ConfigChange::MakeKnown`]): the only way a topic whose settings are unknown gets them
//!   known, so that neither a round trip of what reading showed nor another setting can;
//! - blank lines and lines starting with `#` are skipped.
//!
//! **One open, one change.** Every `write()` checks all the lines written since open (or the
//! last `close()`) as one change against the topic's settings now
//! ([`TopicSource::check_topic_config`]), and the unfinished last line as far as it goes
//! ([`TopicSource::check_value_prefix`]: `retention.ms=abc` is refused before its newline).
//! Nothing is applied before `close()` (the `flush` of the descriptor), which applies the whole
//! text as one change through [`TopicSource::alter_topic_config`] and starts over (a second
//! `close()` of a duplicate descriptor applies nothing twice). A refused write fails with
//! `EINVAL` naming the line, the setting and the rule, and nothing of that open is applied: its
//! later writes and its `close()` fail too. A line longer than [`MAX_LINE`] bytes, or more than
//! [`MAX_TEXT`] bytes since open, is refused at the write that passes the bound. Each byte is
//! scanned once (only the unfinished line, at most [`MAX_LINE`] bytes, is judged again at the
//! next write); quoted text in errors is cut to its first 80 bytes.

use std::collections::HashSet;
use std::sync::Mutex;

use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{ConfigChange, ConfigEntry, ConfigSource, TopicSource};

use super::TopicFs;

/// The longest line a `config` file takes (a setting's line is far shorter).
pub const MAX_LINE: usize = 4096;
/// The most bytes one open of a `config` file takes (the file reads a few KiB).
pub const MAX_TEXT: u64 = 1 << 20;
/// The first line of the text of a topic whose settings are unknown.
pub const UNKNOWN_HEADER: &str = "# settings unknown: no retention and no compaction until \
                                  cleanup.policy=delete (or compact) is written to this file\n";
/// What follows the source of a setting the source does not apply.
const NOT_APPLIED: &str = "; not applied: settings unknown";
/// The setting whose line, written without a comment, makes a topic's settings known.
const CLEANUP_POLICY: &str = "cleanup.policy";
/// The most bytes of written text an error quotes.
const SHOWN_BYTES: usize = 80;

/// The text of a `config` file for `entries`.
pub fn config_text(entries: &[ConfigEntry]) -> String {
    let mut text = String::new();
    if entries.iter().any(|e| !e.applied) {
        text.push_str(UNKNOWN_HEADER);
    }
    for entry in entries {
        text.push_str(&entry.name);
        text.push('=');
        text.push_str(entry.value.as_deref().unwrap_or(""));
        text.push_str(" # ");
        text.push_str(ConfigSource::as_str(entry.source));
        if !entry.applied {
            text.push_str(NOT_APPLIED);
        }
        text.push('\n');
    }
    text
}

/// An open `config` file: its text at `open`, and what was written since.
#[derive(Debug)]
pub struct ConfigHandle {
    pub topic: String,
    pub text: Vec<u8>,
    written: Mutex<Written>,
}

impl ConfigHandle {
    pub fn new(topic: String, text: Vec<u8>) -> ConfigHandle {
        ConfigHandle { topic, text, written: Mutex::new(Written::default()) }
    }
}

/// What was written to a `config` handle since open or its last `close()`.
#[derive(Debug, Default)]
struct Written {
    /// The unfinished last line.
    partial: Vec<u8>,
    /// Complete lines taken (the number of the last one).
    lines: usize,
    /// Bytes taken.
    bytes: u64,
    /// The changes of the lines taken, checked: the last line of each setting (with its line
    /// number), in the order the settings first came.
    changes: Vec<(usize, ConfigChange)>,
    /// A `cleanup.policy` line without a comment was taken.
    make_known: bool,
    /// A write was refused: nothing of this open is applied.
    refused: bool,
}

impl TopicFs {
    /// The text of `topic`'s `config` file now.
    pub(super) fn config_text(&self, topic: &str) -> Result<String> {
        Ok(config_text(&self.source.topic_config(topic)?))
    }

    /// One `write()` to a `config` file: checks it with everything written since open (see
    /// the module doc); applies nothing.
    pub(super) fn config_write(&self, handle: &ConfigHandle, data: &[u8]) -> Result<()> {
        let mut written = lock(&handle.written);
        if written.refused {
            return Err(refused_before(&handle.topic));
        }
        let result = self.config_take(&handle.topic, &mut written, data);
        if result.is_err() {
            *written = Written { refused: true, ..Written::default() };
        }
        result
    }

    /// `close()` of a `config` file (each descriptor's): applies what was written since open as
    /// one change, with the unfinished last line, and starts over.
    pub(super) fn config_flush(&self, handle: &ConfigHandle) -> Result<()> {
        let mut written = lock(&handle.written);
        if written.refused {
            return Err(refused_before(&handle.topic));
        }
        let result = self.config_apply(&handle.topic, &mut written);
        *written = Written { refused: result.is_err(), ..Written::default() };
        result
    }

    /// The release of a `config` handle: applies what no `close()` did. A refusal was reported
    /// by the write or `close()` it came from.
    pub(super) fn config_release(&self, handle: &ConfigHandle) -> Result<()> {
        if lock(&handle.written).refused {
            return Ok(());
        }
        self.config_flush(handle)
    }

    fn config_take(&self, topic: &str, written: &mut Written, data: &[u8]) -> Result<()> {
        let bytes = written.bytes.saturating_add(data.len() as u64);
        if bytes > MAX_TEXT {
            return Err(refusal(
                topic,
                &format!("line {}", written.lines + 1),
                format!("more than {MAX_TEXT} bytes written since open (the file reads a few KiB)"),
            ));
        }
        written.bytes = bytes;
        let mut current = Current::default();
        let mut new = Vec::new();
        let mut rest = data;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            let (piece, after) = rest.split_at(end);
            rest = after.get(1..).unwrap_or_default();
            check_line_length(topic, written, piece)?;
            written.partial.extend_from_slice(piece);
            let line = std::mem::take(&mut written.partial);
            written.lines += 1;
            let number = written.lines;
            self.parse_line(topic, number, &line, &mut current, &mut new, &mut written.make_known)?;
        }
        check_line_length(topic, written, rest)?;
        written.partial.extend_from_slice(rest);
        self.check_changes(topic, written, new)?;
        self.judge_partial(topic, written.lines + 1, &written.partial, &mut current)
    }

    fn config_apply(&self, topic: &str, written: &mut Written) -> Result<()> {
        let partial = std::mem::take(&mut written.partial);
        if !partial.iter().all(u8::is_ascii_whitespace) {
            written.lines += 1;
            let (number, mut new) = (written.lines, Vec::new());
            let mut current = Current::default();
            self.parse_line(
                topic,
                number,
                &partial,
                &mut current,
                &mut new,
                &mut written.make_known,
            )?;
            self.check_changes(topic, written, new)?;
        }
        if written.changes.is_empty() && !written.make_known {
            return Ok(());
        }
        let mut changes = plain(&written.changes);
        if written.make_known {
            changes.push(ConfigChange::MakeKnown);
        }
        self.source
            .alter_topic_config(topic, &changes)
            .map_err(|e| refusal_of(topic, "at close", e))
    }

    /// The change one complete line asks for, added to `new`.
    fn parse_line(
        &self,
        topic: &str,
        number: usize,
        line: &[u8],
        current: &mut Current,
        new: &mut Vec<(usize, ConfigChange)>,
        make_known: &mut bool,
    ) -> Result<()> {
        let at = format!("line {number}");
        let text = std::str::from_utf8(line)
            .map_err(|_| refusal(topic, &at, "not UTF-8 text".to_string()))?;
        let line = text.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let (setting, commented) = match line.split_once(" #") {
            Some((setting, _)) => (setting.trim(), true),
            None => (line, false),
        };
        let Some((name, value)) = setting.split_once('=') else {
            return Err(refusal(
                topic,
                &at,
                format!(
                    "expected name=value (or name= to remove an override), found {}",
                    shown(line)
                ),
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return Err(refusal(topic, &at, "no setting name".to_string()));
        }
        if commented {
            let now = current.get(self.source.as_ref(), topic)?.iter().find(|e| e.name == name);
            if now.is_some_and(|e| e.value.as_deref().unwrap_or("") == value) {
                // What reading shows: no setting line.
                return Ok(());
            }
            return Err(not_as_shown(topic, &at, line, name, now));
        }
        if name == CLEANUP_POLICY && !value.is_empty() {
            // A stated policy; `cleanup.policy=` (removing an override) states nothing.
            *make_known = true;
        }
        new.push((
            number,
            if value.is_empty() {
                ConfigChange::Remove { name: name.to_string() }
            } else {
                ConfigChange::Set { name: name.to_string(), value: value.to_string() }
            },
        ));
        Ok(())
    }

    /// Checks `written.changes` with `new` as one change, and keeps them. A setting named again
    /// in `new` is checked once with each value: every line's value is judged, each check
    /// covering all that was written.
    fn check_changes(
        &self,
        topic: &str,
        written: &mut Written,
        new: Vec<(usize, ConfigChange)>,
    ) -> Result<()> {
        if new.is_empty() {
            return Ok(());
        }
        let mut before = written.changes.clone();
        let mut round = before.clone();
        let mut names: HashSet<&str> = HashSet::new();
        let mut start = 0;
        for (i, (number, change)) in new.iter().enumerate() {
            let name = change_name(change);
            if !names.insert(name) {
                self.check_round(topic, &before, &round, &new[start..i])?;
                before = round.clone();
                names.clear();
                names.insert(name);
                start = i;
            }
            upsert(&mut round, *number, change);
        }
        self.check_round(topic, &before, &round, &new[start..])?;
        written.changes = round;
        Ok(())
    }

    /// Checks `after` (`before` with `added`); refused, names the first line of `added` whose
    /// addition is refused.
    fn check_round(
        &self,
        topic: &str,
        before: &[(usize, ConfigChange)],
        after: &[(usize, ConfigChange)],
        added: &[(usize, ConfigChange)],
    ) -> Result<()> {
        let Err(whole) = self.source.check_topic_config(topic, &plain(after)) else {
            return Ok(());
        };
        if !matches!(whole, Error::InvalidInput(_)) {
            return Err(whole);
        }
        let mut partial = before.to_vec();
        for (number, change) in added {
            upsert(&mut partial, *number, change);
            if let Err(e) = self.source.check_topic_config(topic, &plain(&partial)) {
                return Err(refusal_of(topic, &format!("line {number}"), e));
            }
        }
        let first = added.first().map_or(0, |(n, _)| *n);
        let last = added.last().map_or(0, |(n, _)| *n);
        Err(refusal_of(topic, &format!("lines {first}-{last}"), whole))
    }

    /// Refuses the unfinished line `partial` (line `number`) when no continuation can make it
    /// a valid line: a name no setting has, a value that cannot become valid.
    fn judge_partial(
        &self,
        topic: &str,
        number: usize,
        partial: &[u8],
        current: &mut Current,
    ) -> Result<()> {
        let at = format!("line {number}");
        let text = match std::str::from_utf8(partial) {
            Ok(text) => text,
            // A character cut by the end of the write: judge what comes before it.
            Err(e) if e.error_len().is_none() => {
                std::str::from_utf8(partial.get(..e.valid_up_to()).unwrap_or_default())
                    .unwrap_or_default()
            }
            Err(_) => return Err(refusal(topic, &at, "not UTF-8 text".to_string())),
        };
        let line = text.trim_start();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let (setting, commented) = match line.split_once(" #") {
            Some((setting, _)) => (setting, true),
            None => (line, false),
        };
        let entries = current.get(self.source.as_ref(), topic)?;
        let Some((name, value)) = setting.split_once('=') else {
            let name = setting.trim_end();
            let ended = commented || name.len() < setting.len();
            let possible = !name.contains(char::is_whitespace)
                && entries
                    .iter()
                    .any(|e| if ended { e.name == name } else { e.name.starts_with(name) });
            if possible && !commented {
                return Ok(());
            }
            return Err(refusal(
                topic,
                &at,
                format!("expected name=value with a topic setting's name, found {}", shown(line)),
            ));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(refusal(topic, &at, "no setting name".to_string()));
        }
        if !entries.iter().any(|e| e.name == name) {
            return Err(refusal(topic, &at, format!("unknown topic setting {}", shown(name))));
        }
        // A comment ends the value.
        let value = if commented { format!("{} ", value.trim_end()) } else { value.to_string() };
        let entry = entries.iter().find(|e| e.name == name);
        let now = entry.and_then(|e| e.value.as_deref());
        if commented {
            if now == Some(value.trim()) {
                return Ok(());
            }
            return Err(not_as_shown(topic, &at, line, name, entry));
        }
        self.source.check_value_prefix(name, &value).map_err(|e| refusal_of(topic, &at, e))
    }
}

/// The refusal of a line in the form reading shows (`name=value # comment`) whose value is not
/// what the topic has now: such a line only confirms what `config` shows, it never changes a
/// setting (a saved copy written back after the settings changed would otherwise pin the
/// values it showed, defaults included, as overrides).
fn not_as_shown(topic: &str, at: &str, line: &str, name: &str, now: Option<&ConfigEntry>) -> Error {
    let now = match now {
        Some(e) => format!(
            "{name}={} # {}",
            e.value.as_deref().unwrap_or(""),
            ConfigSource::as_str(e.source)
        ),
        None => format!("no setting {}", shown(name)),
    };
    refusal(
        topic,
        at,
        format!(
            "{} is not what the topic has now ({now}); a line with a ` #` comment only confirms \
             what config shows: write `{name}=VALUE` without the comment to set it, or `{name}=` \
             to remove its override",
            shown(line.trim())
        ),
    )
}

/// The topic's settings, asked for once per write when needed.
#[derive(Default)]
struct Current(Option<Vec<ConfigEntry>>);

impl Current {
    fn get(&mut self, source: &dyn TopicSource, topic: &str) -> Result<&[ConfigEntry]> {
        if self.0.is_none() {
            self.0 = Some(source.topic_config(topic)?);
        }
        Ok(self.0.as_deref().unwrap_or_default())
    }
}

/// Refuses a line growing past [`MAX_LINE`] with `more`.
fn check_line_length(topic: &str, written: &Written, more: &[u8]) -> Result<()> {
    let length = written.partial.len().saturating_add(more.len());
    if length <= MAX_LINE {
        return Ok(());
    }
    let start: Vec<u8> = written.partial.iter().chain(more).take(SHOWN_BYTES).copied().collect();
    let start = String::from_utf8_lossy(&start);
    Err(refusal(
        topic,
        &format!("line {}", written.lines + 1),
        format!("longer than {MAX_LINE} bytes (at least {length}), starting {start:?}"),
    ))
}

fn change_name(change: &ConfigChange) -> &str {
    match change {
        ConfigChange::Set { name, .. } | ConfigChange::Remove { name } => name,
        ConfigChange::MakeKnown => "",
    }
}

/// Puts `change` in `changes` in place of the one of the same setting, or last.
fn upsert(changes: &mut Vec<(usize, ConfigChange)>, number: usize, change: &ConfigChange) {
    let name = change_name(change);
    match changes.iter_mut().find(|(_, c)| change_name(c) == name) {
        Some(slot) => *slot = (number, change.clone()),
        None => changes.push((number, change.clone())),
    }
}

fn plain(changes: &[(usize, ConfigChange)]) -> Vec<ConfigChange> {
    changes.iter().map(|(_, c)| c.clone()).collect()
}

/// `text` quoted for an error: whole up to [`SHOWN_BYTES`], else its start and its length.
fn shown(text: &str) -> String {
    if text.len() <= SHOWN_BYTES {
        return format!("{text:?}");
    }
    let mut end = SHOWN_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", text.get(..end).unwrap_or_default(), text.len())
}

/// The refusal of a write to `topic`'s `config` at `at` (`line 3`) for `why`.
fn refusal(topic: &str, at: &str, why: String) -> Error {
    Error::InvalidInput(format!(
        "{topic}/config {at}: {why}; nothing written to it since open is applied"
    ))
}

/// [`refusal`] for a source's refusal; other errors as they are.
fn refusal_of(topic: &str, at: &str, e: Error) -> Error {
    match e {
        Error::InvalidInput(why) => refusal(topic, at, why),
        other => other,
    }
}

/// The refusal of a write or `close()` after a refused write of the same open.
fn refused_before(topic: &str) -> Error {
    Error::InvalidInput(format!(
        "{topic}/config: a write since open was refused; nothing written to it since open is \
         applied"
    ))
}
