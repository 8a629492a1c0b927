//! Loading a partition's log from its directory: listing the segment files (refusing names that
//! are not regular files), Kafka's temporary-file passes ([`crate::swap`]), and recovery
//! of the segments after an unclean shutdown.

use super::*;

/// A segment-file name of a partition directory that is not a regular file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RefusedFile {
    pub(super) name: String,
    pub(super) found: FileType,
}

/// Lists `dir` and picks out the names that parse as segment files (every kind and state) but
/// are not regular files (by the listing's file type, else `stat`, which never blocks); the
/// other names are returned as they are. Each refused name is logged once per process (warn).
pub(super) fn list_segment_files(dir: &Path) -> Result<(Vec<String>, Vec<RefusedFile>)> {
    let mut names = Vec::new();
    let mut refused = Vec::new();
    for entry in crate::open::read_dir(dir)? {
        let entry = entry.map_err(|e| Error::io(dir, "readdir", e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if parse_segment_file_name(&name).is_none() {
            names.push(name);
            continue;
        }
        // The listing's own type answers for plain files (no `stat` per segment file on every
        // refresh); links and anything else are looked at through `stat`.
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            names.push(name);
            continue;
        }
        let path = dir.join(&name);
        match crate::open::file_type(&path) {
            Ok(FileType::Regular) => names.push(name),
            Ok(found) => {
                let e = Error::WrongFileType { file: path, found, expected: FileType::Regular };
                if e.first_report() {
                    log::warn!("{e}; the partition is served without it");
                }
                refused.push(RefusedFile { name, found });
            }
            // Gone since the listing (a broker renaming): as if never listed.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, "stat", e)),
        }
    }
    refused.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((names, refused))
}

/// The one line a writable load logs of what Kafka's temporary-file passes did (the files
/// `removed`, the `.swap` files renamed into place): how many, the first and the last name;
/// `None` when they did nothing.
pub(super) fn leftovers_summary(mut removed: Vec<String>, swapped: usize) -> Option<String> {
    removed.sort();
    let mut parts = Vec::new();
    match (removed.first(), removed.last()) {
        (Some(only), _) if removed.len() == 1 => parts.push(format!("removed 1 file ({only})")),
        (Some(first), Some(last)) => {
            parts.push(format!("removed {} files ({first} ... {last})", removed.len()))
        }
        _ => {}
    }
    if swapped > 0 {
        parts.push(format!("renamed {swapped} .swap files into place"));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "finished what an interrupted log cleaning or segment deletion left: {} (each at debug \
         level)",
        parts.join(", ")
    ))
}

impl Log {
    pub(super) fn load(&self, state: LoadState) -> Result<()> {
        let logs = self.scan_files()?;
        let max_index = self.config().segment_index_bytes;
        let interval = self.config().index_interval_bytes;
        let mut segments = BTreeMap::new();
        for (i, files) in logs.iter().enumerate() {
            let active = i + 1 == logs.len();
            let base = &files.base_offset;
            let seg = if files.swap {
                LogSegment::open_swap(&self.dir, *base, max_index, interval)?
            } else {
                LogSegment::open(&self.dir, *base, self.mode, max_index, interval, active)?
            };
            if !seg.file_path(".index").exists()
                || (self.mode == SegmentMode::ReadOnly && !seg.file_path(".timeindex").exists())
            {
                // Kafka rebuilds a segment missing its offset index at load.
                log::info!("{}: index missing, rebuilding", seg.log_path().display());
                self.recover_segment(&seg)?;
            }
            segments.insert(*base, Arc::new(seg));
        }

        if !state.had_clean_shutdown {
            let recovery_point = state.recovery_point.unwrap_or(Offset(0));
            let from =
                segments.range(..=recovery_point).next_back().map_or(Offset(i64::MIN), |(b, _)| *b);
            let to_recover: Vec<Offset> = segments.range(from..).map(|(b, _)| *b).collect();
            for base in to_recover {
                let Some(seg) = segments.get(&base).cloned() else { continue };
                let result = self.recover_segment(&seg)?;
                if result.truncated_bytes > 0 {
                    let later: Vec<Offset> = segments
                        .range((Bound::Excluded(base), Bound::Unbounded))
                        .map(|(b, _)| *b)
                        .collect();
                    for b in later {
                        if let Some(s) = segments.remove(&b) {
                            log::warn!(
                                "{}: deleting segment {} after the truncated one",
                                self.dir.display(),
                                s.log_path().display()
                            );
                            if self.writable() {
                                s.delete_files()?;
                            }
                        }
                    }
                    if let Some(last) = segments.values().next_back()
                        && !last.is_active()
                    {
                        last.on_become_active()?;
                    }
                    break;
                }
            }
        }

        let checkpoint_start = state.log_start_offset.unwrap_or(Offset(0));
        if segments.is_empty() && self.writable() {
            let seg = LogSegment::create(&self.dir, checkpoint_start, max_index, interval)?;
            segments.insert(checkpoint_start, Arc::new(seg));
        }
        let log_end = match segments.values().next_back() {
            Some(active) => {
                if self.writable() {
                    active.on_become_active()?;
                }
                // A clean shutdown promises whole batches up to the end of the active segment
                // (and a live broker's half-written batch is not one): if the end is not a
                // batch boundary, recover the segment rather than append after (or read into)
                // the junk. Read-only mode only hides it.
                let whole = match active.translate_offset(Offset(i64::MAX)) {
                    Ok(Translated::End(stop)) => stop.0 == active.size(),
                    Ok(Translated::Batch(_)) => true,
                    Err(e) => {
                        log::warn!("{e}");
                        false
                    }
                };
                if !whole {
                    log::warn!(
                        "{}: the active segment does not end with a whole batch; recovering",
                        active.log_path().display()
                    );
                    self.recover_segment(active)?;
                }
                active.next_offset()?
            }
            None => checkpoint_start,
        };
        if self.writable() && log_end < checkpoint_start {
            // Everything is below the checkpointed log start offset: start over there.
            log::warn!(
                "{}: log end offset {log_end} is below the log start offset {checkpoint_start}; \
                 deleting all segments",
                self.dir.display()
            );
            for (_, s) in std::mem::take(&mut segments) {
                s.delete_files()?;
            }
            let seg = LogSegment::create(&self.dir, checkpoint_start, max_index, interval)?;
            segments.insert(checkpoint_start, Arc::new(seg));
        }
        let log_end = match segments.values().next_back() {
            Some(active) => active.next_offset()?,
            None => log_end,
        };
        let empty_active = segments.values().next_back().is_some_and(|a| a.size() == 0);
        let first_base = segments.keys().next().copied().unwrap_or(log_end);
        let log_start = checkpoint_start.max(first_base).min(log_end);
        let recovery_point = if state.had_clean_shutdown {
            log_end
        } else {
            state.recovery_point.unwrap_or(Offset(0)).min(log_end)
        };
        self.offsets.set_loaded(log_start, log_end, recovery_point);
        if let Some(last) = segments.values().next_back() {
            *lock(&self.last_modified) = last.last_modified();
        }
        {
            // No holder of the append lock loads (see `Writer`).
            let mut writer = lock(&self.writer);
            writer.active_all_ours = self.writable() && empty_active;
            writer.roll_jitter_ms = self.draw_roll_jitter(log_end);
        }
        self.segments.replace_all(segments);
        Ok(())
    }

    pub(super) fn recover_segment(
        &self,
        seg: &LogSegment,
    ) -> Result<crate::segment::RecoveryResult> {
        self.listing.recovered_segments.fetch_add(1, Ordering::Relaxed);
        seg.recover()
    }

    /// Lists the segments, sorted by base offset, after Kafka's temporary-file passes: in
    /// writable mode on disk (delete `.deleted` and `.cleaned`, finish or drop `.swap`, delete
    /// orphaned index files); in read-only mode in memory, changing nothing (see
    /// [`crate::swap`]).
    pub(super) fn scan_files(&self) -> Result<Vec<SegmentFiles>> {
        let (names, refused) = list_segment_files(&self.dir)?;
        *lock(&self.listing.refused) = refused;
        self.note_beside_entries(names.iter().any(|n| crate::cache::is_beside_name(n)));
        let parsed: Vec<(String, _)> =
            names.into_iter().filter_map(|n| parse_segment_file_name(&n).map(|p| (n, p))).collect();
        if self.mode == SegmentMode::ReadOnly {
            let files: Vec<_> = parsed.into_iter().map(|(_, p)| p).collect();
            return read_only_segment_files(&self.dir, &files);
        }
        // Each file removed or renamed is logged at debug; the whole at warn, in one line
        // (a crash in the middle of cleaning can leave hundreds).
        let removed = std::cell::RefCell::new(Vec::new());
        let remove = |name: &str| -> Result<()> {
            let path = self.dir.join(name);
            log::debug!("removing {}", path.display());
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, "remove", e))?;
            removed.borrow_mut().push(name.to_string());
            Ok(())
        };
        // Pass 1: `.deleted` go; `.swap` at or above the smallest `.cleaned` go; `.cleaned` go.
        let min_cleaned = parsed
            .iter()
            .filter(|(_, p)| p.state == Some(FileState::Cleaned))
            .map(|(_, p)| p.base_offset)
            .min();
        let mut swaps = Vec::new();
        let mut live = Vec::new();
        for (name, p) in parsed {
            match p.state {
                Some(FileState::Deleted) | Some(FileState::Cleaned) => remove(&name)?,
                Some(FileState::Swap) if min_cleaned.is_some_and(|m| p.base_offset >= m) => {
                    remove(&name)?
                }
                Some(FileState::Swap) => swaps.push((name, p)),
                None => live.push((name, p)),
            }
        }
        // Pass 2: originals replaced by a `.swap` go, then the `.swap` suffixes are dropped.
        let swap_ranges: Vec<(Offset, Offset)> = swaps
            .iter()
            .filter(|(_, p)| p.kind == FileKind::Log)
            .map(|(name, p)| {
                Ok((p.base_offset, next_offset_of_log_file(&self.dir.join(name), p.base_offset)?))
            })
            .collect::<Result<_>>()?;
        if let (Some(min), Some(max)) =
            (swap_ranges.iter().map(|r| r.0).min(), swap_ranges.iter().map(|r| r.1).max())
        {
            live.retain(|(name, p)| {
                let replaced = p.base_offset >= min && p.base_offset < max;
                if replaced {
                    let _ = remove(name);
                    if p.kind == FileKind::Log {
                        crate::cache::remove_beside_entries(&self.dir, p.base_offset);
                    }
                }
                !replaced
            });
        }
        let swapped = swaps.len();
        for (name, p) in swaps {
            let from = self.dir.join(&name);
            let to = self.dir.join(name.trim_end_matches(FileState::Swap.suffix()));
            log::debug!("renaming {} to {}", from.display(), to.display());
            std::fs::rename(&from, &to).map_err(|e| Error::io(&from, "rename", e))?;
            live.push((name.trim_end_matches(FileState::Swap.suffix()).to_string(), p));
        }
        // Pass 3: index files without a `.log` are orphans.
        let mut logs: Vec<Offset> = live
            .iter()
            .filter(|(_, p)| p.kind == FileKind::Log)
            .map(|(_, p)| p.base_offset)
            .collect();
        for (name, p) in &live {
            let is_index =
                matches!(p.kind, FileKind::Index | FileKind::TimeIndex | FileKind::TxnIndex);
            if is_index && !logs.contains(&p.base_offset) {
                remove(name)?;
            }
        }
        logs.sort();
        logs.dedup();
        if let Some(summary) = leftovers_summary(removed.into_inner(), swapped) {
            log::warn!("{}: {summary}", self.dir.display());
        }
        // Pass 4: what a mount kept beside segments that are gone, and a crash's temporaries.
        crate::cache::remove_stray_beside_files(&self.dir);
        Ok(logs.into_iter().map(|base_offset| SegmentFiles { base_offset, swap: false }).collect())
    }
}
