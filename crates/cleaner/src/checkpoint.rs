//! Reading and writing `cleaner-offset-checkpoint`.

use super::*;

/// The entries of `cleaner-offset-checkpoint` in `data_dir`: `(topic, partition)` → the
/// offset the log is cleaned up to. An absent file is empty; a damaged one is logged and
/// treated as empty (Kafka: every log then starts dirty at its log start).
pub fn read_checkpoint(data_dir: &Path) -> BTreeMap<(String, u32), Offset> {
    let path = data_dir.join(CHECKPOINT_FILE);
    let text = match topicfs_storage::open::read_regular_to_string(&path) {
        Ok(t) => t,
        Err(e) if topicfs_storage::open::is_not_found(&e) => return BTreeMap::new(),
        Err(e) => {
            log::warn!("{e}; every compacted log is taken as dirty from its log start");
            return BTreeMap::new();
        }
    };
    match parse_offset_checkpoint(&text) {
        Ok(entries) => entries.into_iter().map(|(t, p, o)| ((t, p), Offset(o))).collect(),
        Err(e) => {
            log::warn!(
                "{}: damaged at byte {}: {e}; every compacted log is taken as dirty from its \
                 log start",
                path.display(),
                e.at
            );
            BTreeMap::new()
        }
    }
}

/// Writes `cleaner-offset-checkpoint` in `data_dir` (temporary file, fsync, rename, fsync of
/// the directory).
pub fn write_checkpoint(data_dir: &Path, entries: &BTreeMap<(String, u32), Offset>) -> Result<()> {
    let list: Vec<(String, u32, i64)> =
        entries.iter().map(|((t, p), o)| (t.clone(), *p, o.0)).collect();
    let path = data_dir.join(CHECKPOINT_FILE);
    let tmp = data_dir.join(format!("{CHECKPOINT_FILE}.tmp"));
    {
        use std::io::Write;
        let mut f = topicfs_storage::open::open_regular(
            &tmp,
            std::fs::OpenOptions::new().write(true).create(true).truncate(true),
            "create",
        )?;
        f.write_all(format_offset_checkpoint(&list).as_bytes())
            .map_err(|e| Error::io(&tmp, "write", e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, "fsync", e))?;
    }
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&tmp, "rename", e))?;
    topicfs_storage::open::sync_dir(data_dir)
}
