//! Swapping a cleaned output in for its inputs, crash-safe (Kafka's `replaceSegments`).

use super::*;

pub(super) enum SwapDone {
    Done,
    Stopped(CrashStep),
    Changed,
}

/// Removes the `.cleaned` files of the output `base` (an abandoned output).
pub(super) fn remove_cleaned(dir: &Path, base: Offset) {
    for kind in KINDS {
        let path = file_path(dir, base, kind, CLEANED);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("{}: not removed: {e}", path.display()),
        }
    }
}

fn rename(from: &Path, to: &Path) -> Result<bool> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(from, "rename", e)),
    }
}

/// Kafka's `replaceSegments` for one output: under the append lock, checks the inputs are
/// unchanged, renames the output `.cleaned` → `.swap`, the inputs → `.deleted`, the output
/// `.swap` → final, installs it, then removes the `.deleted` files.
pub(super) fn swap_in(
    log: &Log,
    inputs: &[Arc<LogSegment>],
    base: Offset,
    crash_at: Option<CrashStep>,
) -> Result<SwapDone> {
    let dir = log.dir();
    let _guard = log.cleaner_lock();
    let current = log.segment_list();
    let unchanged =
        inputs.iter().all(|seg| current.iter().any(|c| Arc::ptr_eq(c, seg)) && !seg.is_active());
    if !unchanged {
        remove_cleaned(dir, base);
        return Ok(SwapDone::Changed);
    }
    // Readers holding an input keep reading it after its files are renamed: load its indexes
    // now (a map survives the rename and the removal).
    for seg in inputs {
        seg.with_offset_index(|_| ())?;
        seg.with_time_index(|_| ())?;
    }
    let stop = |step: CrashStep| crash_at == Some(step);
    // 1. `.cleaned` → `.swap`, the `.log` first (Kafka's `changeFileSuffixes` order).
    for kind in KINDS {
        let from = file_path(dir, base, kind, CLEANED);
        rename(&from, &file_path(dir, base, kind, SWAP))?;
        if kind == ".log" && stop(CrashStep::MidSwapRename) {
            return Ok(SwapDone::Stopped(CrashStep::MidSwapRename));
        }
    }
    topicfs_storage::open::sync_dir(dir)?;
    if stop(CrashStep::SwapRenamed) {
        return Ok(SwapDone::Stopped(CrashStep::SwapRenamed));
    }
    // 2. The inputs → `.deleted` (with the producer snapshots at the base offsets that go).
    let mut deleted = Vec::new();
    for (i, seg) in inputs.iter().enumerate() {
        let b = seg.base_offset();
        let mut kinds: Vec<&str> = KINDS.to_vec();
        if b != base {
            kinds.push(".snapshot");
        }
        for kind in kinds {
            let to = file_path(dir, b, kind, ".deleted");
            if rename(&file_path(dir, b, kind, ""), &to)? {
                deleted.push(to);
            }
        }
        // Its entries kept beside the segments describe bytes that go (the output's base is
        // the first input's: its entries would be stale).
        topicfs_storage::cache::remove_beside_entries(dir, b);
        if i == 0 && stop(CrashStep::MidDeleteRename) {
            return Ok(SwapDone::Stopped(CrashStep::MidDeleteRename));
        }
    }
    if stop(CrashStep::OldDeleted) {
        return Ok(SwapDone::Stopped(CrashStep::OldDeleted));
    }
    // 3. `.swap` → final.
    for kind in KINDS {
        rename(&file_path(dir, base, kind, SWAP), &file_path(dir, base, kind, ""))?;
        if kind == ".log" && stop(CrashStep::MidFinalRename) {
            return Ok(SwapDone::Stopped(CrashStep::MidFinalRename));
        }
    }
    topicfs_storage::open::sync_dir(dir)?;
    let output = Arc::new(log.open_cleaned_segment(base)?);
    log.install_cleaned(inputs, output);
    for path in deleted {
        if let Err(e) = std::fs::remove_file(&path) {
            log::warn!("{}: not removed: {e}", path.display());
        }
    }
    Ok(SwapDone::Done)
}
