//! Consumer groups through their coordinator: FindCoordinator, OffsetCommit, OffsetFetch,
//! ListGroups and DescribeGroups.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Client, name};
use crate::config::BrokerAddr;
use crate::conn::Connection;
use crate::errors::check_code;
use topicfs_source::error::{Error, Result};

/// A committed group offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed offset: the next record to consume (-1: none committed).
    pub offset: i64,
    /// Commit metadata.
    pub metadata: Option<String>,
}

/// A group as ListGroups lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// Protocol type (`consumer`, or empty for offsets-only groups).
    pub protocol_type: String,
    /// State (ListGroups v4+; empty before).
    pub state: String,
}

/// One member of a described group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    /// Member id.
    pub member_id: String,
    /// Its client.id.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
}

/// A group as DescribeGroups describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// State (`Empty`, `Stable`, `Dead`, ...).
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// Protocol (assignor) name.
    pub protocol: String,
    /// Members.
    pub members: Vec<GroupMember>,
}

impl Client {
    /// FindCoordinator for a consumer group: the coordinator's connection.
    fn coordinator(&self, group: &str, deadline: Instant) -> Result<Arc<Connection>> {
        let conn = self.any_conn(deadline)?;
        let version = conn.version::<FindCoordinatorRequest>(6)?;
        let mut req = FindCoordinatorRequest::default().with_key_type(0);
        if version >= 4 {
            req = req.with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
        } else {
            req = req.with_key(StrBytes::from_string(group.to_string()));
        }
        let r = conn.call(&req, version, deadline)?;
        let broker = conn.addr().to_string();
        let (code, message, host, port) = if version >= 4 {
            let c = r.coordinators.first().ok_or_else(|| Error::Protocol {
                broker: broker.clone(),
                what: "FindCoordinator without a coordinator".into(),
            })?;
            (c.error_code, c.error_message.clone(), c.host.clone(), c.port)
        } else {
            (r.error_code, r.error_message.clone(), r.host.clone(), r.port)
        };
        check_code(&broker, "FindCoordinator", code, None, None, message.as_deref())?;
        let port = u16::try_from(port).map_err(|_| Error::Protocol {
            broker: broker.clone(),
            what: format!("coordinator port {port}"),
        })?;
        self.conn(&BrokerAddr { host: host.to_string(), port }, deadline)
    }

    /// OffsetCommit outside any group generation (generation -1, empty member id), as
    /// `kafka-consumer-groups --reset-offsets` does: the broker accepts it only while the group
    /// has no active members (else UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, EBUSY).
    pub fn commit_offsets(
        &self,
        group: &str,
        topic: &str,
        offsets: &[(i32, i64, Option<String>)],
    ) -> Result<()> {
        let deadline = self.deadline();
        self.retry("OffsetCommit", deadline, |deadline| {
            let conn = self.coordinator(group, deadline)?;
            let version = conn.version::<OffsetCommitRequest>(9)?;
            let req = OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(StrBytes::from_static_str(""))
                .with_retention_time_ms(-1)
                .with_topics(vec![
                    OffsetCommitRequestTopic::default().with_name(name(topic)).with_partitions(
                        offsets
                            .iter()
                            .map(|(p, o, m)| {
                                OffsetCommitRequestPartition::default()
                                    .with_partition_index(*p)
                                    .with_committed_offset(*o)
                                    .with_committed_leader_epoch(-1)
                                    .with_committed_metadata(m.clone().map(StrBytes::from_string))
                            })
                            .collect(),
                    ),
                ]);
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            for t in &r.topics {
                for p in &t.partitions {
                    let (topic, partition) = (Some(t.name.0.as_str()), Some(p.partition_index));
                    check_code(&broker, "OffsetCommit", p.error_code, topic, partition, None)?;
                }
            }
            Ok(())
        })
    }

    /// OffsetFetch: the group's committed offsets, for the given topics and partitions or (with
    /// `None`) for everything the group committed.
    pub fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<CommittedOffset>> {
        let deadline = self.deadline();
        self.retry("OffsetFetch", deadline, |deadline| {
            let conn = self.coordinator(group, deadline)?;
            let version = conn.version::<OffsetFetchRequest>(9)?;
            let gid = GroupId(StrBytes::from_string(group.to_string()));
            let mut req = OffsetFetchRequest::default().with_require_stable(false);
            if version >= 8 {
                let topics = topics.map(|ts| {
                    ts.iter()
                        .map(|(t, ps)| {
                            OffsetFetchRequestTopics::default()
                                .with_name(name(t))
                                .with_partition_indexes(ps.clone())
                        })
                        .collect()
                });
                req = req.with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(gid)
                        .with_member_epoch(-1)
                        .with_topics(topics),
                ]);
            } else {
                let topics = topics.map(|ts| {
                    ts.iter()
                        .map(|(t, ps)| {
                            OffsetFetchRequestTopic::default()
                                .with_name(name(t))
                                .with_partition_indexes(ps.clone())
                        })
                        .collect()
                });
                req = req.with_group_id(gid).with_topics(topics);
            }
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            let mut out = Vec::new();
            // One partition's answer (v8+ and older versions name the same fields by other types).
            let mut add =
                |topic: &TopicName, partition: i32, code, offset, meta: &Option<StrBytes>| {
                    check_code(
                        &broker,
                        "OffsetFetch",
                        code,
                        Some(topic.0.as_str()),
                        Some(partition),
                        None,
                    )?;
                    out.push(CommittedOffset {
                        topic: topic.0.to_string(),
                        partition,
                        offset,
                        metadata: meta.as_ref().map(|m| m.to_string()),
                    });
                    Ok::<_, Error>(())
                };
            if version >= 8 {
                for g in &r.groups {
                    check_code(&broker, "OffsetFetch", g.error_code, None, None, None)?;
                    for t in &g.topics {
                        for p in &t.partitions {
                            let (i, o) = (p.partition_index, p.committed_offset);
                            add(&t.name, i, p.error_code, o, &p.metadata)?;
                        }
                    }
                }
            } else {
                check_code(&broker, "OffsetFetch", r.error_code, None, None, None)?;
                for t in &r.topics {
                    for p in &t.partitions {
                        let (i, o) = (p.partition_index, p.committed_offset);
                        add(&t.name, i, p.error_code, o, &p.metadata)?;
                    }
                }
            }
            Ok(out)
        })
    }

    /// ListGroups on every broker, merged and sorted by group id.
    pub fn list_groups(&self) -> Result<Vec<GroupListing>> {
        let deadline = self.deadline();
        let md = self.metadata_by(deadline)?;
        let mut out = BTreeMap::new();
        for &id in md.brokers.keys() {
            let r = self.retry("ListGroups", deadline, |deadline| {
                let conn = self.broker_conn(&md, id, deadline)?;
                let version = conn.version::<ListGroupsRequest>(4)?;
                let r = conn.call(&ListGroupsRequest::default(), version, deadline)?;
                check_code(&conn.addr().to_string(), "ListGroups", r.error_code, None, None, None)?;
                Ok(r.groups)
            })?;
            for g in r {
                out.insert(
                    g.group_id.0.to_string(),
                    GroupListing {
                        group_id: g.group_id.0.to_string(),
                        protocol_type: g.protocol_type.to_string(),
                        state: g.group_state.to_string(),
                    },
                );
            }
        }
        Ok(out.into_values().collect())
    }

    /// DescribeGroups through each group's coordinator. A group the coordinator does not know
    /// is described with state `Dead` (as Kafka answers), not an error.
    pub fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        let deadline = self.deadline();
        self.retry("DescribeGroups", deadline, |deadline| {
            let conn = self.coordinator(group, deadline)?;
            let version = conn.version::<DescribeGroupsRequest>(5)?;
            let req = DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_string(group.to_string()))]);
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            let g =
                r.groups.into_iter().find(|g| g.group_id.0.as_str() == group).ok_or_else(|| {
                    Error::Protocol {
                        broker: broker.clone(),
                        what: format!("DescribeGroups without {group}"),
                    }
                })?;
            let message = g.error_message.as_deref();
            check_code(&broker, "DescribeGroups", g.error_code, None, None, message)?;
            Ok(GroupDescription {
                group_id: group.to_string(),
                state: g.group_state.to_string(),
                protocol_type: g.protocol_type.to_string(),
                protocol: g.protocol_data.to_string(),
                members: g
                    .members
                    .iter()
                    .map(|m| GroupMember {
                        member_id: m.member_id.to_string(),
                        client_id: m.client_id.to_string(),
                        client_host: m.client_host.to_string(),
                    })
                    .collect(),
            })
        })
    }
}
