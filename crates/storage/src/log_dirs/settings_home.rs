//! Which of a broker's log dirs keeps the topics' overrides file ([`TOPIC_CONFIG_FILE`]),
//! whatever the order the dirs are given in (a broker does not care about the order of
//! `log.dirs`, so neither do the topics' settings):
//!
//! - the dir that holds the file;
//! - none does: the first dir in byte order of the dirs' canonical paths (the file is created
//!   there at the first write);
//! - several do, byte-identical: the first of them in that order; the others are logged
//!   (warn) and, on a writable mount, removed (they hold nothing the kept one does not, and
//!   would be left behind at the next change);
//! - several do and they differ (or one cannot be read): the first of them in that order,
//!   taken as damaged ([`Error::Corrupt`] at the first byte that differs, naming the other
//!   file): every topic's settings count as unknown and changes fail with `EIO`, as for a
//!   damaged file, until the copy that is out of date is removed. Logged at error level
//!   naming both files.

use super::*;
use topicfs_settings::topic_config::TOPIC_CONFIG_FILE;

/// Where the overrides file of the dirs `paths` is: the index of its dir in `paths` and, when
/// the dirs hold several files that differ, the damage to take the kept one as having (byte
/// position, what). `writable`: identical copies are removed. Errors: a removal that fails.
pub(super) fn settings_home(
    paths: &[PathBuf],
    writable: bool,
) -> Result<(usize, Option<(u64, String)>)> {
    // Byte order (a `PathBuf` compares by components, which differs: `a-b` < `a/b` in bytes).
    let mut order: Vec<(Vec<u8>, usize)> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let canonical = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            (canonical.into_os_string().into_encoded_bytes(), i)
        })
        .collect();
    order.sort();
    let holders: Vec<usize> = order
        .iter()
        .map(|(_, i)| *i)
        .filter(|&i| match open::file_type(&paths[i].join(TOPIC_CONFIG_FILE)) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        })
        .collect();
    let (home, others) = match holders.split_first() {
        Some((home, others)) => (*home, others),
        None => return Ok((order.first().map_or(0, |(_, i)| *i), None)),
    };
    let kept = paths[home].join(TOPIC_CONFIG_FILE);
    let kept_bytes = open::read_regular(&kept);
    let mut conflict = None;
    for &other in others {
        let file = paths[other].join(TOPIC_CONFIG_FILE);
        let difference = match (&kept_bytes, open::read_regular(&file)) {
            (Ok(a), Ok(b)) if *a == b => None,
            (Ok(a), Ok(b)) => {
                let at = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
                Some((at as u64, format!("it differs from {} from this byte on", file.display())))
            }
            (Err(e), _) => Some((0, format!("it cannot be compared with {}: {e}", file.display()))),
            (_, Err(e)) => Some((0, format!("{} cannot be compared with it: {e}", file.display()))),
        };
        match difference {
            None if writable => {
                std::fs::remove_file(&file).map_err(|e| Error::io(&file, "remove", e))?;
                open::sync_dir(&paths[other])?;
                log::warn!(
                    "{} was the same as {}, which keeps the topics' overrides of these log dirs: \
                     removed",
                    file.display(),
                    kept.display()
                );
            }
            None => log::warn!(
                "{} is the same as {}, which keeps the topics' overrides of these log dirs: not \
                 read (a writable mount removes it)",
                file.display(),
                kept.display()
            ),
            Some((at, what)) => {
                log::error!(
                    "{} and {} both hold the topics' overrides of these log dirs and differ \
                     (at byte {at}: {what}): every topic's settings count as unknown (no \
                     retention by time or size, no compaction) and changes to them fail until \
                     the copy that is out of date is removed",
                    kept.display(),
                    file.display()
                );
                if conflict.is_none() {
                    conflict = Some((
                        at,
                        format!(
                            "{what}; the overrides of several log dirs are one file: remove the \
                             copy that is out of date"
                        ),
                    ));
                }
            }
        }
    }
    Ok((home, conflict))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_is_the_holder_else_the_first_path_in_byte_order_whatever_the_order_given() {
        let tmp = tempfile::tempdir().unwrap();
        // In bytes `a-b` comes before `a/b` ('-' < '/'); by path components it comes after.
        let paths = [tmp.path().join("a/b"), tmp.path().join("a-b"), tmp.path().join("c")];
        for p in &paths {
            std::fs::create_dir_all(p).unwrap();
        }
        let rev: Vec<PathBuf> = paths.iter().rev().cloned().collect();
        assert_eq!(settings_home(&paths, true).unwrap(), (1, None));
        assert_eq!(settings_home(&rev, true).unwrap(), (1, None));
        std::fs::write(paths[2].join(TOPIC_CONFIG_FILE), "x\n").unwrap();
        assert_eq!(settings_home(&paths, true).unwrap(), (2, None));
        assert_eq!(settings_home(&rev, true).unwrap(), (0, None));
        // Two that differ: the first by bytes kept, damaged at the first byte that differs.
        std::fs::write(paths[0].join(TOPIC_CONFIG_FILE), "xy\n").unwrap();
        let (home, conflict) = settings_home(&paths, true).unwrap();
        assert_eq!(home, 0, "a/b before c");
        let (at, what) = conflict.unwrap();
        assert_eq!(at, 1);
        assert!(what.contains(&paths[2].join(TOPIC_CONFIG_FILE).display().to_string()), "{what}");
        assert!(paths[2].join(TOPIC_CONFIG_FILE).exists(), "nothing removed");
    }
}
