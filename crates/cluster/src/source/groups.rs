//! Consumer groups on a cluster: [`ClusterGroups`] (the `GroupStore` seam) and the error of a
//! refused commit.

use std::sync::Arc;

use crate::Client;
use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};

/// Consumer groups' committed offsets on a cluster: ListGroups and OffsetFetch to read,
/// OffsetCommit to commit (as `kafka-consumer-groups --reset-offsets` does: refused with EBUSY
/// while the group has live members).
pub struct ClusterGroups {
    client: Arc<Client>,
}

impl ClusterGroups {
    /// The groups of the cluster `client` talks to.
    pub fn new(client: Arc<Client>) -> ClusterGroups {
        ClusterGroups { client }
    }
}

impl topicfs_source::GroupStore for ClusterGroups {
    fn groups(&self, topic: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for g in self.client.list_groups()? {
            let committed = self.client.fetch_offsets(&g.group_id, None)?;
            if committed.iter().any(|c| c.topic == topic && c.offset >= 0) {
                out.push(g.group_id);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn committed(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<std::collections::BTreeMap<u32, topicfs_source::CommittedOffset>> {
        let mut out = std::collections::BTreeMap::new();
        for c in self.client.fetch_offsets(group, None)? {
            let Ok(p) = u32::try_from(c.partition) else { continue };
            if c.topic == topic && c.offset >= 0 {
                out.insert(
                    p,
                    topicfs_source::CommittedOffset {
                        offset: Offset(c.offset),
                        metadata: c.metadata.unwrap_or_default(),
                        // OffsetFetch does not return the commit time.
                        commit_timestamp: topicfs_format::NO_TIMESTAMP,
                    },
                );
            }
        }
        Ok(out)
    }

    fn commit(&self, group: &str, topic: &str, offsets: &[(u32, Offset)]) -> Result<()> {
        let offsets: Vec<(i32, i64, Option<String>)> =
            offsets.iter().map(|&(p, o)| (p as i32, o.0, None)).collect();
        match self.client.commit_offsets(group, topic, &offsets) {
            Err(err) if err.errno() == libc::EBUSY => {
                // Kafka refuses a commit from outside the group while it has members: name
                // the group's state (ListGroups v4+; DescribeGroups is not needed for it).
                let state = self.client.list_groups().ok().and_then(|listing| {
                    listing.into_iter().find(|g| g.group_id == group).map(|g| g.state)
                });
                Err(group_in_use(err, group, state.as_deref()))
            }
            other => other,
        }
    }
}

/// The error of a commit the group's coordinator refused because the group is in use
/// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS: EBUSY), with a message
/// naming the group's `state` as the broker reported it (or saying it did not). Other errors
/// are returned unchanged.
pub fn group_in_use(err: Error, group: &str, state: Option<&str>) -> Error {
    let Error::Kafka { broker, api, code, name, topic, partition, message: _ } = err else {
        return err;
    };
    let state = match state {
        Some(s) if !s.is_empty() && !s.eq_ignore_ascii_case("unknown") => s.to_string(),
        Some(_) => "not reported by the broker".to_string(),
        None => "unknown: the broker no longer lists the group".to_string(),
    };
    let message = format!(
        "group {group:?} is in use by active members (state {state}); Kafka accepts a commit \
         from outside the group only while it has none: stop its consumers first, as \
         kafka-consumer-groups --reset-offsets requires"
    );
    Error::Kafka { broker, api, code, name, topic, partition, message: Some(message.into()) }
}
