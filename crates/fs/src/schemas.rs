//! `<topic>/schemas/`: a topic's schemas as files, for a mount with schemas
//! ([`TopicFs::with_schemas`]).
//!
//! ```text
//! <topic>/schemas/                         the topic's subjects: <topic>-key, <topic>-value
//!                                          (TopicNameStrategy), those with a version
//! <topic>/schemas/<subject>/               its versions, latest, versions
//! <topic>/schemas/<subject>/<version>      the schema text as registered
//! <topic>/schemas/<subject>/latest         the latest version's text
//! <topic>/schemas/<subject>/versions       "<version> <id> <type>" per version, ascending
//! ```
//!
//! Texts are read from the schema source when opened (a snapshot per open, exact size).

use std::sync::Arc;

use super::TopicFs;
use super::node::{DirNode, FileNode, Node};
use topicfs_source::error::{Error, Result};
use topicfs_view::schemas::Schemas;

/// The file listing a subject's versions.
pub const VERSIONS: &str = "versions";
/// The file holding a subject's latest version.
pub const LATEST: &str = "latest";

/// The subjects of `topic` under the TopicNameStrategy, in the order shown.
fn topic_subjects(topic: &str) -> [String; 2] {
    [format!("{topic}-key"), format!("{topic}-value")]
}

impl TopicFs {
    fn schemas_or_absent(&self, what: &Node) -> Result<&Arc<Schemas>> {
        self.schemas().ok_or_else(|| {
            Error::NotFound(format!("{}: this mount has no schemas", super::describe(what)))
        })
    }

    /// The subjects `<topic>/schemas/` lists: those of the topic with a version.
    pub(super) fn schema_subjects(&self, topic: &str) -> Result<Vec<String>> {
        let node = Node::Dir(DirNode::SchemasDir(topic.to_string()));
        let schemas = self.schemas_or_absent(&node)?;
        self.source.partitions(topic)?;
        let known = schemas.source().subjects()?;
        Ok(topic_subjects(topic).into_iter().filter(|s| known.contains(s)).collect())
    }

    /// `Ok` when `subject` is one `<topic>/schemas/` lists.
    pub(super) fn check_schema_subject(&self, topic: &str, subject: &str) -> Result<()> {
        if self.schema_subjects(topic)?.iter().any(|s| s == subject) {
            Ok(())
        } else {
            Err(Error::NotFound(format!("{topic}/schemas/{subject}")))
        }
    }

    /// The names in `<topic>/schemas/<subject>/`.
    pub(super) fn schema_file_names(&self, topic: &str, subject: &str) -> Result<Vec<String>> {
        self.check_schema_subject(topic, subject)?;
        let node = Node::Dir(DirNode::SchemaSubject(topic.to_string(), subject.to_string()));
        let versions = self.schemas_or_absent(&node)?.source().versions(subject)?;
        let mut names: Vec<String> = versions.iter().map(|(v, _)| v.to_string()).collect();
        names.push(LATEST.to_string());
        names.push(VERSIONS.to_string());
        Ok(names)
    }

    /// The text of `<topic>/schemas/<subject>/<name>` now.
    pub(super) fn schema_text(&self, node: &Node) -> Result<String> {
        let Node::File(FileNode::SchemaFile(topic, subject, name)) = node else {
            return Err(Error::NotFound(format!("{} is not a schema file", super::describe(node))));
        };
        self.check_schema_subject(topic, subject)?;
        let source = self.schemas_or_absent(node)?.source();
        let absent = || Error::NotFound(super::describe(node));
        match name.as_str() {
            VERSIONS => {
                let mut out = String::new();
                for (version, id) in source.versions(subject)? {
                    let record = source.by_subject(subject, Some(version))?;
                    out.push_str(&format!("{version} {id} {}\n", record.schema_type.as_str()));
                }
                Ok(out)
            }
            LATEST => Ok(with_newline(source.by_subject(subject, None)?.text)),
            number => {
                let version: i32 = number.parse().map_err(|_| absent())?;
                if number != version.to_string() || version < 1 {
                    return Err(absent());
                }
                let listed = source.versions(subject)?.iter().any(|(v, _)| *v == version);
                if !listed {
                    return Err(absent());
                }
                Ok(with_newline(source.by_subject(subject, Some(version))?.text))
            }
        }
    }
}

/// `text` ending with a newline (what `cat` users expect of a text file).
fn with_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}
