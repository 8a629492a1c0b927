//! ListOffsets: [`Log::offset_for`] (earliest, latest, max timestamp, by timestamp) and the
//! timestamp lookup across segments, [`Log::find_offset_by_timestamp`], with its per-map-version
//! search structure [`TimeSearch`].

use super::*;

/// What a timestamp lookup searches, for one segment-map version (kept with it by the segment
/// map, [`super::segments`]): the segments' base offsets and the sealed segments' largest
/// timestamps, with their running max.
///
/// **Invariants** (for the version it was built from): `bases` are every segment's base offset in
/// order, the last one the active segment's; `largest[i]` is `largestTimestamp` of sealed segment
/// `i` (all but the last: a sealed segment's timestamps never change while the map is unchanged;
/// the active segment's are read live); `from` is the first segment not wholly below the log start
/// offset (its successor's base offset is above it); `running_max[i]` is the max of
/// `largest[from..=i]` for `i >= from` and `i64::MIN` below, so it is non-decreasing and the first
/// segment at or after `from` whose largest timestamp reaches `t` is the first `i` with
/// `running_max[i] >= t`.
#[derive(Debug)]
pub(super) struct TimeSearch {
    bases: Vec<Offset>,
    largest: Vec<Timestamp>,
    from: usize,
    running_max: Vec<Timestamp>,
}

/// Number of leading segments wholly below `log_start` (each followed by a segment whose base
/// offset is `<= log_start`), given every segment's base offset in order.
fn first_not_below(bases: &[Offset], log_start: Offset) -> usize {
    bases.get(1..).unwrap_or_default().partition_point(|next| *next <= log_start)
}

impl TimeSearch {
    fn new(bases: Vec<Offset>, largest: Vec<Timestamp>, from: usize) -> TimeSearch {
        let mut max = i64::MIN;
        let running_max = largest
            .iter()
            .enumerate()
            .map(|(i, &ts)| {
                if i >= from {
                    max = max.max(ts);
                }
                max
            })
            .collect();
        TimeSearch { bases, largest, from, running_max }
    }

    fn first_not_below(&self, log_start: Offset) -> usize {
        first_not_below(&self.bases, log_start)
    }

    /// Base offset of the first sealed segment not below the log start offset, with base
    /// offset above `after` (when given), whose largest timestamp reaches `target`; `None`
    /// when no sealed segment qualifies (the caller then looks at the active segment).
    fn candidate(&self, target: Timestamp, after: Option<Offset>) -> Option<Offset> {
        let index = match after {
            // The first look: binary search of the non-decreasing running max.
            None => self.running_max.partition_point(|&m| m < target).max(self.from),
            // A candidate had no match (its newest records are below the log start offset):
            // the rest, one by one (rare).
            Some(after) => {
                let start = self.bases.partition_point(|b| *b <= after).max(self.from);
                let rest = self.largest.get(start..).unwrap_or_default();
                start + rest.iter().position(|&ts| ts >= target)?
            }
        };
        self.largest.get(index)?;
        self.bases.get(index).copied()
    }
}

impl Log {
    /// ListOffsets semantics (see [`OffsetQuery`]); never "not found": a timestamp later than
    /// every record gives the log end offset.
    pub fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        self.maybe_refresh()?;
        match query {
            OffsetQuery::Latest => Ok(self.log_end_offset()),
            OffsetQuery::Earliest => Ok(self.log_start_offset()),
            OffsetQuery::MaxTimestamp => {
                let mut best: Option<(Timestamp, Arc<LogSegment>)> = None;
                for seg in self.segment_list() {
                    if let Some((ts, _)) = seg.max_timestamp_so_far()?
                        && best.as_ref().is_none_or(|(b, _)| ts > *b)
                    {
                        best = Some((ts, seg));
                    }
                }
                let found = match best {
                    Some((_, seg)) => seg.find_max_timestamp_record()?,
                    None => None,
                };
                Ok(found.map_or_else(|| self.log_end_offset(), |(o, _)| o))
            }
            OffsetQuery::Timestamp(target) => Ok(self
                .find_offset_by_timestamp(target)?
                .map_or_else(|| self.log_end_offset(), |(o, _)| o)),
        }
    }

    /// The first record (in log order, at or after the log start offset) with timestamp `>=
    /// target`, as `(offset, its timestamp)`; `None` when no record is that new. Unlike Kafka,
    /// the search continues into later segments when the first candidate segment has no match.
    ///
    /// The first candidate segment (the first not wholly below the log start offset whose
    /// largest timestamp reaches `target`, as Kafka's `fetchOffsetByTimestamp`) is found by a
    /// binary search of [`TimeSearch::running_max`], not a pass over every segment.
    pub fn find_offset_by_timestamp(
        &self,
        target: Timestamp,
    ) -> Result<Option<(Offset, Timestamp)>> {
        let log_start = self.log_start_offset();
        let mut after = None;
        loop {
            let candidate = {
                let view = self.segments.read();
                let search = time_search(&view, log_start)?;
                match search.candidate(target, after) {
                    Some(base) => view.get(base).map(Arc::clone),
                    // No sealed segment: the active one, if its (live) max timestamp reaches.
                    None => match view.last() {
                        Some(seg)
                            if after.is_none_or(|a| seg.base_offset() > a)
                                && seg.largest_timestamp()? >= target =>
                        {
                            Some(Arc::clone(seg))
                        }
                        _ => None,
                    },
                }
            };
            let Some(seg) = candidate else { return Ok(None) };
            if let Some(found) = seg.find_offset_by_timestamp(target, log_start)? {
                return Ok(Some(found));
            }
            after = Some(seg.base_offset());
        }
    }
}

/// The [`TimeSearch`] of the map `view` shows, for `log_start`: kept while the map is
/// unchanged, the running max recomputed from the kept timestamps when only the log start offset
/// moved to another segment.
fn time_search(view: &SegmentsView<'_>, log_start: Offset) -> Result<Arc<TimeSearch>> {
    view.time_search(
        |search| search.first_not_below(log_start) == search.from,
        |kept| {
            if let Some(search) = kept {
                let from = search.first_not_below(log_start);
                return Ok(TimeSearch::new(search.bases.clone(), search.largest.clone(), from));
            }
            let bases: Vec<Offset> = view.bases().collect();
            let largest =
                view.sealed().map(|seg| seg.largest_timestamp()).collect::<Result<Vec<_>>>()?;
            let from = first_not_below(&bases, log_start);
            Ok(TimeSearch::new(bases, largest, from))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(largest: &[Timestamp], log_start: i64) -> TimeSearch {
        // Segments at 0, 10, 20, ...; the last one (active) has no cached timestamp.
        let bases: Vec<Offset> = (0..=largest.len() as i64).map(|i| Offset(i * 10)).collect();
        let from = first_not_below(&bases, Offset(log_start));
        TimeSearch::new(bases, largest.to_vec(), from)
    }

    #[test]
    fn timestamp_search_finds_the_first_segment_in_log_order_whose_largest_timestamp_reaches() {
        // Largest timestamps need not grow: 50 comes before 30.
        let s = search(&[10, 50, 30, 70], 0);
        assert_eq!(s.candidate(5, None), Some(Offset(0)));
        assert_eq!(s.candidate(20, None), Some(Offset(10)));
        assert_eq!(s.candidate(40, None), Some(Offset(10)), "not the later 30");
        assert_eq!(s.candidate(60, None), Some(Offset(30)));
        assert_eq!(s.candidate(71, None), None, "only the active segment can still reach");
        // Continuing after a candidate without a match: the next that reaches, in order.
        assert_eq!(s.candidate(25, Some(Offset(10))), Some(Offset(20)));
        assert_eq!(s.candidate(40, Some(Offset(10))), Some(Offset(30)));
        assert_eq!(s.candidate(40, Some(Offset(30))), None);
    }

    #[test]
    fn timestamp_search_skips_segments_wholly_below_the_log_start_offset() {
        // Log start 25: segments 0 and 10 are wholly below it (20 <= 25), 20 straddles it.
        let s = search(&[90, 80, 30, 40], 25);
        assert_eq!(s.from, 2);
        assert_eq!(s.candidate(35, None), Some(Offset(30)), "not 0 or 10, below the start");
        assert_eq!(s.candidate(5, None), Some(Offset(20)));
        // A log start in the active segment leaves only the active segment.
        let s = search(&[90, 80], 20);
        assert_eq!(s.candidate(5, None), None);
    }
}
