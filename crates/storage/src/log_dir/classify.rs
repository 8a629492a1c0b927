//! Classifying a directory as a Kafka log dir or not, by names only.

use super::*;

/// Classifies the directory `path` as a Kafka log dir or not by the names in it (see
/// [`topicfs_format::log_dir_layout`]), reading only names: its entries, and the entries of
/// those named like partition directories. Reads nothing else and writes nothing. A missing
/// directory is [`Layout::Empty`] (a new log dir).
pub fn classify_data_dir(path: &Path) -> Result<Layout> {
    let listing = match open::read_dir(path) {
        Ok(listing) => listing,
        Err(e) if open::is_not_found(&e) => return Ok(Layout::Empty),
        Err(e) => return Err(e),
    };
    // The common case first, without listing anything: a broker's (or topicfs's) dir.
    if matches!(open::file_type(&path.join(META_PROPERTIES)), Ok(FileType::Regular)) {
        return Ok(Layout::MetaProperties);
    }
    let kind_of = |p: &Path| match open::file_type(p) {
        Ok(FileType::Regular) => Ok(EntryKind::File),
        Ok(FileType::Directory) => Ok(EntryKind::Dir),
        Ok(_) => Ok(EntryKind::Other),
        Err(e) => Err(Error::io(p, "stat", e)),
    };
    let mut entries = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| Error::io(path, "readdir", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let full = entry.path();
        let kind = kind_of(&full)?;
        let mut children = Vec::new();
        if kind == EntryKind::Dir && log_dir_layout::is_partition_dir_name(&name) {
            for child in open::read_dir(&full)? {
                let child = child.map_err(|e| Error::io(&full, "readdir", e))?;
                let child_name = child.file_name().to_string_lossy().into_owned();
                children.push((child_name, kind_of(&child.path())?));
            }
        }
        entries.push(RootEntry { name, kind, children });
    }
    Ok(log_dir_layout::classify(&entries))
}
