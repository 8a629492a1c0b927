//! The filesystem's refusals on a cluster mount, against tansu (made before any request, not
//! left to the broker):
//! `mkdir` of an internal topic is `EPERM`, a topic name colliding with an existing one after
//! `.`→`_` is `EINVAL` naming it, a partition count past the mount's maximum is `EINVAL`;
//! nothing is created on the broker.

use crate::common;

use std::ffi::OsStr;
use std::sync::Arc;

use common::fs_fixture::{self, FsFixture};
use common::tansu::Tansu;
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, ClusterSource};
use topicfs::source::TopicSource;

#[test]
fn cluster_mkdir_refuses_internal_topics_colliding_names_and_too_many_partitions() {
    let broker = Tansu::start();
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=10000").unwrap();
    let client = Client::connect(parse_bootstrap(&broker.bootstrap()).unwrap(), config).unwrap();
    let source = Arc::new(ClusterSource::new(Arc::new(client), false));
    let fs = FsFixture::over(Arc::clone(&source) as Arc<dyn TopicSource>)
        .partitions_per_topic(2)
        .build()
        .with_max_partitions(3);
    let root = fs_fixture::ino(&fs, "/").unwrap();
    let mkdir = |parent: u64, name: &str| fs.mkdir(parent, OsStr::new(name)).map(drop);
    for topic in ["__transaction_state", "__cluster_metadata"] {
        assert_eq!(mkdir(root, topic).unwrap_err().errno(), libc::EPERM, "{topic}");
    }
    mkdir(root, "a.b").unwrap();
    let err = mkdir(root, "a_b").unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL, "{err}");
    assert!(err.to_string().contains("\"a.b\""), "names the existing topic: {err}");
    let topic = fs_fixture::ino(&fs, "a.b").unwrap();
    // tansu has no CreatePartitions, so partition 2 (within the maximum) is EOPNOTSUPP; 3 is
    // refused before any request.
    assert_eq!(mkdir(topic, "3").unwrap_err().errno(), libc::EINVAL);
    let fs_over_max = FsFixture::over(Arc::clone(&source) as Arc<dyn TopicSource>)
        .partitions_per_topic(4)
        .build()
        .with_max_partitions(3);
    let root = fs_fixture::ino(&fs_over_max, "/").unwrap();
    assert_eq!(fs_over_max.mkdir(root, OsStr::new("big")).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(source.topics().unwrap(), ["a.b"], "nothing else created on the broker");
    assert_eq!(source.partitions("a.b").unwrap(), [0, 1]);
}
