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
use std::time::SystemTime;

use super::TopicFs;
use super::attr::{AttrReply, DYNAMIC_TTL, OpenRequest, Opened};
use super::handle::{Handle, StreamRef};
use super::node::{DirNode, FileNode, Node, SchemaDir, SchemaFile};
use super::open::direct;
use super::subtree::{DirAttr, SubtreeDir, SubtreeFile};
use topicfs_source::error::{Error, Result};
use topicfs_view::schemas::Schemas;

/// The file listing a subject's versions.
pub const VERSIONS: &str = "versions";
/// The file holding a subject's latest version.
pub const LATEST: &str = "latest";

impl SubtreeDir for SchemaDir {
    fn child(&self, _fs: &TopicFs, name: &str) -> Result<Option<Node>> {
        Ok(Some(match self {
            SchemaDir::Subjects(topic) => {
                schema_dir(SchemaDir::Subject(topic.clone(), name.into()))
            }
            SchemaDir::Subject(topic, subject) => {
                let (topic, subject, name) = (topic.clone(), subject.clone(), name.to_string());
                Node::File(FileNode::Schemas(SchemaFile { topic, subject, name }))
            }
        }))
    }

    fn list(&self, fs: &TopicFs) -> Result<Vec<(String, Node)>> {
        Ok(match self {
            SchemaDir::Subjects(topic) => fs
                .schema_subjects(topic)?
                .into_iter()
                .map(|s| (s.clone(), schema_dir(SchemaDir::Subject(topic.clone(), s))))
                .collect(),
            SchemaDir::Subject(topic, subject) => fs
                .schema_file_names(topic, subject)?
                .into_iter()
                .map(|name| {
                    let (topic, subject) = (topic.clone(), subject.clone());
                    let file = SchemaFile { topic, subject, name: name.clone() };
                    (name, Node::File(FileNode::Schemas(file)))
                })
                .collect(),
        })
    }

    fn attr(&self, fs: &TopicFs) -> Result<DirAttr> {
        let topic = match self {
            SchemaDir::Subjects(topic) => {
                fs.schema_subjects(topic)?;
                topic
            }
            SchemaDir::Subject(topic, subject) => {
                fs.check_schema_subject(topic, subject)?;
                topic
            }
        };
        Ok(DirAttr { perm: fs.dir_perm(false), mtime: fs.topic_mtime(topic)?, ttl: DYNAMIC_TTL })
    }
}

impl SubtreeFile for SchemaFile {
    fn mtime(&self, fs: &TopicFs) -> Result<SystemTime> {
        fs.topic_mtime(&self.topic)
    }

    fn is_stream(&self) -> bool {
        false
    }

    fn resolve(&self, _fs: &TopicFs) -> Result<StreamRef> {
        Err(Error::NotFound(format!("{} is not a stream", self.path())))
    }

    fn is_writable(&self) -> bool {
        false
    }

    fn attr(&self, fs: &TopicFs, ino: u64, _node: &Node) -> Result<AttrReply> {
        let size = fs.schema_text(self)?.len() as u64;
        let mtime = self.mtime(fs)?;
        Ok(fs.file_reply(ino, size, fs.read_only_perm(), mtime, DYNAMIC_TTL))
    }

    fn open(&self, fs: &TopicFs, _ino: u64, _node: &Node, request: OpenRequest) -> Result<Opened> {
        fs.refuse_write(request, "writing a schema file")?;
        let text = fs.schema_text(self)?;
        Ok(direct(fs.handles.insert(Handle::Text(text.into_bytes()))))
    }
}

fn schema_dir(dir: SchemaDir) -> Node {
    Node::Dir(DirNode::Schemas(dir))
}

/// The subjects of `topic` under the TopicNameStrategy, in the order shown.
fn topic_subjects(topic: &str) -> [String; 2] {
    [format!("{topic}-key"), format!("{topic}-value")]
}

impl TopicFs {
    fn schemas_or_absent(&self, what: &str) -> Result<&Arc<Schemas>> {
        self.schemas().ok_or_else(|| Error::NotFound(format!("{what}: this mount has no schemas")))
    }

    /// The subjects `<topic>/schemas/` lists: those of the topic with a version.
    fn schema_subjects(&self, topic: &str) -> Result<Vec<String>> {
        let schemas = self.schemas_or_absent(&SchemaDir::Subjects(topic.to_string()).path())?;
        self.source.partitions(topic)?;
        let known = schemas.source().subjects()?;
        Ok(topic_subjects(topic).into_iter().filter(|s| known.contains(s)).collect())
    }

    /// `Ok` when `subject` is one `<topic>/schemas/` lists.
    fn check_schema_subject(&self, topic: &str, subject: &str) -> Result<()> {
        if self.schema_subjects(topic)?.iter().any(|s| s == subject) {
            Ok(())
        } else {
            Err(Error::NotFound(format!("{topic}/schemas/{subject}")))
        }
    }

    /// The names in `<topic>/schemas/<subject>/`.
    fn schema_file_names(&self, topic: &str, subject: &str) -> Result<Vec<String>> {
        self.check_schema_subject(topic, subject)?;
        let dir = SchemaDir::Subject(topic.to_string(), subject.to_string());
        let versions = self.schemas_or_absent(&dir.path())?.source().versions(subject)?;
        let mut names: Vec<String> = versions.iter().map(|(v, _)| v.to_string()).collect();
        names.push(LATEST.to_string());
        names.push(VERSIONS.to_string());
        Ok(names)
    }

    /// The text of `<topic>/schemas/<subject>/<name>` now.
    fn schema_text(&self, file: &SchemaFile) -> Result<String> {
        let SchemaFile { topic, subject, name } = file;
        self.check_schema_subject(topic, subject)?;
        let source = self.schemas_or_absent(&file.path())?.source();
        let absent = || Error::NotFound(file.path());
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
