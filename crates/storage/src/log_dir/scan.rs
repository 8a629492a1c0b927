//! Listing and loading the partition directories, and the read-only rescan.

use super::*;

impl LogDir {
    /// The partition directories under the data dir, by (topic, partition); `log_skipped`
    /// logs why other directories are not partitions.
    pub(super) fn partition_dirs(
        &self,
        log_skipped: bool,
    ) -> Result<BTreeMap<(String, u32), PathBuf>> {
        let path = &self.path;
        let mut out = BTreeMap::new();
        for entry in open::read_dir(path)? {
            let entry = entry.map_err(|e| Error::io(path, "readdir", e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
            let Ok(entry_type) = entry.file_type() else { continue };
            if entry_type.is_symlink() && parse_partition_dir(&name).is_some() {
                // A symlinked partition directory is followed; a link to anything else (or
                // dangling, or looping) is refused, named once in the log.
                match open::file_type(&entry.path()) {
                    Ok(FileType::Directory) => {}
                    Ok(found) => {
                        refuse_partition_dir(entry.path(), found);
                        continue;
                    }
                    Err(_) => continue,
                }
            } else if !entry_type.is_dir() {
                if parse_partition_dir(&name).is_some() && !entry_type.is_file() {
                    if let Ok(found) = open::file_type(&entry.path()) {
                        refuse_partition_dir(entry.path(), found);
                    }
                }
                continue;
            }
            if let Some(special) = parse_special_dir(&name) {
                if log_skipped {
                    log::info!(
                        "skipping {name}: {:?} directory of {}",
                        special.kind,
                        special.topic
                    );
                }
                continue;
            }
            let Some((topic, partition)) = parse_partition_dir(&name) else {
                if log_skipped {
                    log::debug!("skipping {name}: not a partition directory");
                }
                continue;
            };
            // A read-only mount shows the KRaft metadata log like any topic; a writable one
            // leaves it to the raft layer (no recovery, no checkpoints, no appends).
            if topic == CLUSTER_METADATA_TOPIC && self.mode == SegmentMode::Writable {
                continue;
            }
            // Held by another log dir of the mount too: neither copy is served or touched.
            if self.excluded.contains_key(&(topic.clone(), partition)) {
                continue;
            }
            out.insert((topic, partition), entry.path());
        }
        Ok(out)
    }

    /// Opens the partitions `dirs`, with their recovery points and log start offsets from the
    /// checkpoints as they are now. A partition that cannot be loaded is logged and left out.
    pub(super) fn load_partitions(
        &self,
        dirs: Vec<((String, u32), PathBuf)>,
    ) -> BTreeMap<(String, u32), Arc<Log>> {
        let mut logs = BTreeMap::new();
        if dirs.is_empty() {
            return logs;
        }
        let recovery_points = read_checkpoint(&self.path.join(RECOVERY_POINT_CHECKPOINT));
        let log_starts = read_checkpoint(&self.path.join(LOG_START_OFFSET_CHECKPOINT));
        for (key, dir) in dirs {
            let state = LoadState {
                had_clean_shutdown: self.had_clean_shutdown,
                recovery_point: recovery_points.get(&key).copied().map(Offset),
                log_start_offset: log_starts.get(&key).copied().map(Offset),
            };
            let (topic, partition) = (&key.0, key.1);
            let resolved = self.resolve_topic(topic);
            match Log::open(&dir, topic, partition, resolved.config, self.mode, state) {
                Ok(log) => {
                    log.set_settings_known(resolved.known);
                    self.setup.give(&log, &self.beside);
                    lock(&self.failed).remove(&key);
                    logs.insert(key, Arc::new(log));
                }
                Err(e) => {
                    if lock(&self.failed).insert(key.clone()) {
                        log::error!("cannot load partition {}: {e}", dir.display());
                    } else {
                        log::debug!("cannot load partition {} again: {e}", dir.display());
                    }
                }
            }
        }
        logs
    }

    /// Read-only mode: lists the data dir again, at most every [`RESCAN_INTERVAL_MS`], and
    /// takes in the partitions a broker created (opened as at mount) or deleted (a partition
    /// whose directory is gone, e.g. renamed `-delete`, is no longer listed; readers holding
    /// its log keep reading what they opened). A listing error is logged and retried later.
    pub(super) fn maybe_rescan(&self) {
        if self.mode == SegmentMode::Writable {
            return;
        }
        let now = now_ms();
        let last = self.last_rescan_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < RESCAN_INTERVAL_MS
            || self
                .last_rescan_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        self.refresh_cluster_metadata();
        let _guard = lock(&self.admin_lock);
        let on_disk = match self.partition_dirs(false) {
            Ok(dirs) => dirs,
            Err(e) => {
                log::warn!("{e}; listing partitions again later");
                return;
            }
        };
        let known: BTreeSet<(String, u32)> =
            self.logs.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        let gone: Vec<&(String, u32)> =
            known.iter().filter(|k| !on_disk.contains_key(*k)).collect();
        let new: Vec<((String, u32), PathBuf)> =
            on_disk.into_iter().filter(|(k, _)| !known.contains(k)).collect();
        if gone.is_empty() && new.is_empty() {
            return;
        }
        let added = self.load_partitions(new);
        let mut logs = self.logs.write().unwrap_or_else(|e| e.into_inner());
        for key in gone {
            log::info!("partition {}-{} is gone from {}", key.0, key.1, self.path.display());
            logs.remove(key);
        }
        for (key, log) in added {
            log::info!("partition {}-{} appeared in {}", key.0, key.1, self.path.display());
            logs.insert(key, log);
        }
    }
}

/// Logs, once per process, a name shaped like a partition directory that is not one.
pub(super) fn refuse_partition_dir(path: PathBuf, found: FileType) {
    let e = Error::WrongFileType { file: path, found, expected: FileType::Directory };
    if e.first_report() {
        log::warn!("{e}; no partition is served from it");
    }
}
