//! `meta.properties`, the file naming the broker a log dir belongs to: its name and the
//! identity several dirs of one broker agree on. A leaf: the single dir
//! ([`crate::log_dir`]) writes the file, the set of dirs ([`crate::log_dirs::identity`]) checks
//! that theirs agree, and neither needs the other for it.

/// The file's name, at the root of a log dir.
pub const META_PROPERTIES: &str = "meta.properties";

/// What the log dirs agree on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    pub cluster_id: Option<String>,
    pub node_id: Option<String>,
    /// Whether the dirs carry a `directory.id` each (KRaft, Kafka 3.7 and later): a new dir
    /// gets one too.
    pub directory_ids: bool,
}
