//! Background sizing: after mount, one low-priority thread renders (counting only) every
//! partition's streams towards their end, so that a brand-new directory gets exact sizes soon
//! after mount instead of at the first `stat` (SEMANTICS.md, "Background sizing").
//!
//! Only partitions whose source keeps summaries of sealed spans (a log directory with a segment
//! cache, [`PartitionSource::sealed_span_at`]) are sized: for them the work is done once and
//! kept across remounts; a cluster's partitions would be fetched whole. Formats in order of
//! cost: values, raw, then JSON. Steps of [`SIZING_STEP`] bytes of log hold one render index's
//! lock at a time; readers of that format and partition wait at most one step, and what the
//! thread rendered is the index's, never rendered again by a reader.

use std::sync::{Arc, Weak};

use crate::source::PartitionSource;
use crate::view::spec::Format;

use super::TopicFs;

/// Log bytes one step of background sizing renders while holding an index's lock.
pub const SIZING_STEP: u64 = 4 << 20;

impl TopicFs {
    /// Starts the background sizing thread over `fs` (held weakly: the thread ends when the
    /// filesystem is dropped or shut down, or when everything is sized). `None` when the
    /// thread could not be started (logged).
    pub fn start_background_sizing(fs: &Arc<TopicFs>) -> Option<std::thread::JoinHandle<()>> {
        let weak = Arc::downgrade(fs);
        let spawned = std::thread::Builder::new()
            .name("topicfs-sizing".into())
            .spawn(move || size_everything(&weak));
        match spawned {
            Ok(handle) => Some(handle),
            Err(e) => {
                log::warn!("background sizing not started: {e}");
                None
            }
        }
    }
}

fn size_everything(weak: &Weak<TopicFs>) {
    let Some(fs) = weak.upgrade() else { return };
    let mut parts: Vec<Arc<dyn PartitionSource>> = Vec::new();
    for topic in fs.source.topics().unwrap_or_default() {
        for p in fs.source.partitions(&topic).unwrap_or_default() {
            let Ok(part) = fs.source.partition(&topic, p) else { continue };
            let keeps_summaries = part
                .summary()
                .and_then(|s| part.seek(s.log_start_offset))
                .is_ok_and(|c| part.sealed_span_at(&c).is_some());
            if keeps_summaries {
                parts.push(part);
            }
        }
    }
    drop(fs);
    let started = std::time::Instant::now();
    let mut sized = 0;
    for format in [Format::Values, Format::Raw, Format::Json] {
        for part in &parts {
            let Some(fs) = weak.upgrade() else { return };
            let go = || !fs.closing.load(std::sync::atomic::Ordering::Relaxed);
            match fs.streams.size_in_background(Arc::clone(part), format, SIZING_STEP, &go) {
                Ok(true) => sized += 1,
                Ok(false) => return,
                Err(e) => log::debug!(
                    "background sizing of {}-{}{} stopped: {e}",
                    part.topic(),
                    part.partition(),
                    format.suffix()
                ),
            }
        }
    }
    log::info!(
        "background sizing: {sized} streams of {} partitions sized in {:.1} s",
        parts.len(),
        started.elapsed().as_secs_f64()
    );
}
