//! Whether several log dirs belong to one broker: their `meta.properties` agree.
//!
//! Kafka's `MetaPropertiesEnsemble.verify` refuses to start a broker whose log dirs disagree on
//! `cluster.id` or on the node id (`node.id` in version 1 files, `broker.id` in version 0), or
//! whose dirs share a `directory.id` (each KRaft log dir has its own). A dir without
//! `meta.properties` (new, or not yet written) agrees with any.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use topicfs_source::error::{Error, Result};

pub use crate::meta_properties::Identity;
use crate::meta_properties::META_PROPERTIES;

/// The node id of a `meta.properties`: `node.id` (version 1) or `broker.id` (version 0).
fn node_id(props: &BTreeMap<String, String>) -> Option<&str> {
    props.get("node.id").or_else(|| props.get("broker.id")).map(|v| v.trim())
}

/// Checks that the `meta.properties` of `dirs` (path, its properties if the file exists) name
/// one broker; the error names each file and field that differs.
pub fn agree(dirs: &[(PathBuf, Option<BTreeMap<String, String>>)]) -> Result<Identity> {
    let file = |dir: &Path| dir.join(META_PROPERTIES).display().to_string();
    let mut identity = Identity::default();
    let mut cluster_from: Option<&Path> = None;
    let mut node_from: Option<&Path> = None;
    let mut seen_ids: BTreeMap<&str, &Path> = BTreeMap::new();
    for (dir, props) in dirs {
        let Some(props) = props else { continue };
        if let Some(cluster) = props.get("cluster.id").map(|v| v.trim()) {
            match (&identity.cluster_id, cluster_from) {
                (Some(agreed), Some(first)) if agreed != cluster => {
                    return Err(Error::Mount(format!(
                        "the log dirs are not one broker's: {} has cluster.id={agreed}, {} has \
                         cluster.id={cluster}",
                        file(first),
                        file(dir)
                    )));
                }
                (Some(_), _) => {}
                (None, _) => {
                    identity.cluster_id = Some(cluster.to_string());
                    cluster_from = Some(dir);
                }
            }
        }
        if let Some(node) = node_id(props) {
            match (&identity.node_id, node_from) {
                (Some(agreed), Some(first)) if agreed != node => {
                    return Err(Error::Mount(format!(
                        "the log dirs are not one broker's: {} has node id {agreed}, {} has \
                         node id {node} (node.id, or broker.id in a version 0 file)",
                        file(first),
                        file(dir)
                    )));
                }
                (Some(_), _) => {}
                (None, _) => {
                    identity.node_id = Some(node.to_string());
                    node_from = Some(dir);
                }
            }
        }
        if let Some(id) = props.get("directory.id").map(|v| v.trim()) {
            identity.directory_ids = true;
            if let Some(first) = seen_ids.insert(id, dir) {
                return Err(Error::Mount(format!(
                    "{} and {} have the same directory.id={id}: one log dir is a copy of the \
                     other (each of a broker's log dirs has its own)",
                    file(first),
                    file(dir)
                )));
            }
        }
    }
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn identity_agrees_across_versions_and_missing_files() {
        let dirs = vec![
            (
                PathBuf::from("/a"),
                props(&[("version", "1"), ("cluster.id", "C"), ("node.id", "3")]),
            ),
            (PathBuf::from("/b"), None),
            (
                PathBuf::from("/c"),
                props(&[("version", "0"), ("cluster.id", "C"), ("broker.id", "3")]),
            ),
        ];
        let id = agree(&dirs).unwrap();
        assert_eq!(id.cluster_id.as_deref(), Some("C"));
        assert_eq!(id.node_id.as_deref(), Some("3"));
        assert!(!id.directory_ids);
    }

    #[test]
    fn identity_refusals_name_both_files_and_the_field() {
        let a = props(&[("cluster.id", "C"), ("node.id", "1"), ("directory.id", "D1")]);
        let other_cluster = props(&[("cluster.id", "X"), ("node.id", "1")]);
        let err = agree(&[("/a".into(), a.clone()), ("/b".into(), other_cluster)]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/a/meta.properties has cluster.id=C"), "{text}");
        assert!(text.contains("/b/meta.properties has cluster.id=X"), "{text}");
        let other_node = props(&[("cluster.id", "C"), ("broker.id", "2")]);
        let text =
            agree(&[("/a".into(), a.clone()), ("/b".into(), other_node)]).unwrap_err().to_string();
        assert!(text.contains("node id 1") && text.contains("node id 2"), "{text}");
        let copy = props(&[("cluster.id", "C"), ("node.id", "1"), ("directory.id", "D1")]);
        let text = agree(&[("/a".into(), a), ("/b".into(), copy)]).unwrap_err().to_string();
        assert!(text.contains("same directory.id=D1"), "{text}");
    }
}
