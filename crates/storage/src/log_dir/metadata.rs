//! Reading the broker's KRaft metadata log (`__cluster_metadata-0`) for the topics' broker settings.

use super::*;

impl LogDir {
    /// Read-only mode: reads what the broker appended to its metadata log since the last
    /// read (a topic created or removed, a setting changed through the broker's admin API) and
    /// re-resolves the topics' settings when anything changed. An error is logged and the
    /// settings read before stay.
    pub(super) fn refresh_cluster_metadata(&self) {
        let changed = {
            let mut reader = lock(&self.shared.metadata);
            match reader.as_mut() {
                Some(r) => match r.refresh() {
                    Ok(changed) => changed.then(|| r.configs().clone()),
                    Err(e) => {
                        log::warn!("{e}; keeping the broker's topic settings read before");
                        None
                    }
                },
                None => {
                    let home = self.shared.metadata_home.as_deref().unwrap_or(&self.path);
                    *reader = open_cluster_metadata(home, &self.shared.meta);
                    reader.as_ref().map(|r| r.configs().clone())
                }
            }
        };
        if let Some(configs) = changed {
            let statics = self
                .shared
                .settings
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .broker
                .static_defaults
                .clone();
            log::info!(
                "{}: the broker's topic settings changed; applying them",
                self.path.display()
            );
            self.shared.set_broker_settings(broker_settings(&configs, statics));
            self.catch_up_settings();
        }
    }
}

/// The broker's metadata log reader for a data dir, with this broker's id from its
/// `meta.properties` (`node.id`, or `broker.id` of a version 0 file); `None` when the dir has no
/// `__cluster_metadata-0` or it cannot be read (logged: the topics it would have made known
/// then stay unknown, so nothing of theirs is deleted or compacted).
pub(super) fn open_cluster_metadata(
    path: &Path,
    meta: &BTreeMap<String, String>,
) -> Option<ClusterMetadataReader> {
    let node_id = meta
        .get("node.id")
        .or_else(|| meta.get("broker.id"))
        .and_then(|v| v.trim().parse::<i32>().ok());
    match ClusterMetadataReader::open(path, node_id) {
        Ok(reader) => {
            if let Some(r) = &reader {
                log::info!(
                    "{}: the broker's metadata log holds settings for {} topic(s) and {} \
                     default(s)",
                    path.display(),
                    r.configs().topics.len(),
                    r.configs().dynamic_defaults.len()
                );
            }
            reader
        }
        Err(e) => {
            log::warn!("{e}; the broker's topic settings in its metadata log are not used");
            None
        }
    }
}

/// The broker layers of the topics' settings: what its metadata log holds, and its static
/// `server.properties` defaults.
pub(super) fn broker_settings(
    configs: &ClusterMetadataConfigs,
    static_defaults: BTreeMap<String, String>,
) -> BrokerSettings {
    BrokerSettings {
        topics: configs.topics.clone(),
        dynamic_defaults: configs.dynamic_defaults.clone(),
        static_defaults,
    }
}
