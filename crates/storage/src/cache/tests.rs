//! Unit tests of the segment cache.

use super::*;

// Kinds as their users name them (the render index, the transaction tracker, the key index).
const RENDER: EntryKind = EntryKind { extension: "render", tag: 1, prefix: false };
const TXN: EntryKind = EntryKind { extension: "txn", tag: 2, prefix: false };
const KEYS: EntryKind = EntryKind { extension: "keys", tag: 3, prefix: false };
const PREFIX_RENDER: EntryKind = EntryKind { extension: "prefix", tag: 4, prefix: true };

fn ident(base: i64) -> SegmentIdentity {
    SegmentIdentity {
        data_dir: PathBuf::from("/data"),
        topic: "t".into(),
        partition: 0,
        base_offset: Offset(base),
        size: 1000,
        mtime_ns: 1_700_000_000_000_000_000,
        inode: 42,
        device: 7,
        fingerprint: 0xdead_beef,
    }
}

fn cache_in(dir: &Path, max: u64) -> SegmentCache {
    SegmentCache::open(&CacheSettings { dir: Some(dir.to_path_buf()), max_bytes: max })
}

#[test]
fn a_stored_payload_loads_back_and_survives_a_new_cache_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cache_in(tmp.path(), 1 << 20);
    assert_eq!(c.load(&ident(0), RENDER), None);
    c.store(&ident(0), RENDER, b"hello");
    c.store(&ident(0), TXN, b"txn");
    assert_eq!(c.load(&ident(0), RENDER).as_deref(), Some(&b"hello"[..]));
    let again = cache_in(tmp.path(), 1 << 20);
    assert_eq!(again.load(&ident(0), TXN).as_deref(), Some(&b"txn"[..]));
    assert_eq!(again.load(&ident(0), KEYS), None);
    assert_eq!(again.load(&ident(1), RENDER), None);
    assert!(again.used() > 0);
    // Replacing keeps one file.
    again.store(&ident(0), RENDER, b"second");
    assert_eq!(again.load(&ident(0), RENDER).as_deref(), Some(&b"second"[..]));
    let files: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(files.len(), 2, "no temporary file is left behind");
}

#[test]
fn each_validation_rule_rejects_its_case() {
    let id = ident(5);
    let good = encode(&id, RENDER, b"payload");
    assert_eq!(decode(&good, &id, RENDER), Ok(&b"payload"[..]));

    // Magic.
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(decode(&bad, &id, RENDER), Err(Rejected::Foreign(_))));
    assert!(matches!(decode(b"{\"json\": 1}", &id, RENDER), Err(Rejected::Foreign(_))));
    // Version.
    let mut bad = good.clone();
    bad[9] = 99;
    assert!(matches!(decode(&bad, &id, RENDER), Err(Rejected::Foreign(_))));
    // Kind.
    assert!(matches!(decode(&good, &id, TXN), Err(Rejected::Foreign(_))));
    // Header CRC: a flipped bit in the key.
    let mut bad = good.clone();
    bad[20] ^= 1;
    assert!(matches!(decode(&bad, &id, RENDER), Err(Rejected::Damaged(_))));
    // Another segment's entry (same name, other key).
    for other in [
        SegmentIdentity { topic: "u".into(), ..id.clone() },
        SegmentIdentity { partition: 1, ..id.clone() },
        SegmentIdentity { base_offset: Offset(6), ..id.clone() },
        SegmentIdentity { data_dir: "/elsewhere".into(), ..id.clone() },
    ] {
        assert_eq!(decode(&good, &other, RENDER), Err(Rejected::OtherSegment));
    }
    // The segment changed.
    for (changed, what) in [
        (SegmentIdentity { size: 1001, ..id.clone() }, "size"),
        (SegmentIdentity { inode: 43, ..id.clone() }, "inode"),
        (SegmentIdentity { device: 8, ..id.clone() }, "inode"),
        (SegmentIdentity { mtime_ns: id.mtime_ns + 1, ..id.clone() }, "mtime"),
        (SegmentIdentity { fingerprint: 1, ..id.clone() }, "bytes (fingerprint)"),
    ] {
        assert_eq!(decode(&good, &changed, RENDER), Err(Rejected::Stale(what)));
    }
    // Truncated, extended, or a payload byte flipped.
    let bad = &good[..good.len() - 1];
    assert!(matches!(decode(bad, &id, RENDER), Err(Rejected::Damaged(_))));
    let mut bad = good.clone();
    bad.push(0);
    assert!(matches!(decode(&bad, &id, RENDER), Err(Rejected::Damaged(_))));
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x80;
    assert!(matches!(decode(&bad, &id, RENDER), Err(Rejected::Damaged(_))));
    // Every prefix is rejected without panicking.
    for n in 0..good.len() {
        assert!(decode(&good[..n], &id, RENDER).is_err());
    }
}

#[test]
fn a_damaged_entry_is_ignored_warned_once_and_replaced_by_the_next_store() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cache_in(tmp.path(), 1 << 20);
    let id = ident(0);
    c.store(&id, TXN, b"aborted ranges");
    let path = c.entry_path(&id, TXN).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(c.load(&id, TXN), None);
    assert!(lock(&c.warned).contains(&path), "the damaged file was warned about");
    assert_eq!(c.load(&id, TXN), None);
    c.store(&id, TXN, b"rebuilt");
    assert!(!lock(&c.warned).contains(&path));
    assert_eq!(c.load(&id, TXN).as_deref(), Some(&b"rebuilt"[..]));
    // A foreign file under an entry's name.
    std::fs::write(&path, b"not ours").unwrap();
    assert_eq!(c.load(&id, TXN), None);
}

#[test]
fn the_identity_of_a_file_changes_when_it_is_replaced_or_rewritten() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("00000000000000000000.log");
    std::fs::write(&p, vec![1u8; 10_000]).unwrap();
    let of = |p: &Path| {
        SegmentIdentity::of_file(tmp.path(), "t", 0, Offset(0), &File::open(p).unwrap()).unwrap()
    };
    let a = of(&p);
    assert_eq!(a, of(&p), "stable while unchanged");
    assert_eq!(a.size, 10_000);
    // Rewritten in place with the same size and mtime: the fingerprint differs.
    let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
    let mut bytes = vec![1u8; 10_000];
    bytes[9_999] = 2;
    std::fs::write(&p, &bytes).unwrap();
    File::options().write(true).open(&p).unwrap().set_modified(mtime).unwrap();
    let b = of(&p);
    assert_eq!((a.size, a.mtime_ns, a.inode), (b.size, b.mtime_ns, b.inode));
    assert_ne!(a.fingerprint, b.fingerprint);
    // Replaced by another file (compaction's rename): the inode differs.
    let q = tmp.path().join("new");
    std::fs::write(&q, &bytes).unwrap();
    std::fs::rename(&q, &p).unwrap();
    assert_ne!(of(&p).inode, b.inode);
    // Tiny and empty files have identities too.
    std::fs::write(&p, b"").unwrap();
    assert_eq!(of(&p).size, 0);
}

#[test]
fn an_active_prefix_entry_survives_appends_and_is_rejected_when_truncated_replaced_rewritten_or_damaged()
 {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let c = cache_in(&tmp.path().join("cache"), 1 << 20);
    let p = data.join("00000000000000000000.log");
    let mut bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&p, &bytes).unwrap();
    let prefix = 12_000u64;
    let name =
        SegmentIdentity { size: 0, mtime_ns: 0, inode: 0, device: 0, fingerprint: 0, ..ident(0) };
    let name = SegmentIdentity { data_dir: data.clone(), ..name };
    let of = |p: &Path, prefix: u64| {
        SegmentIdentity::of_prefix(&data, "t", 0, Offset(0), &File::open(p).unwrap(), prefix)
            .unwrap()
    };
    let load = |p: &Path| c.load_prefix(&name, PREFIX_RENDER, |n| of(p, n));
    assert_eq!(load(&p), None, "nothing stored yet");
    c.store(&of(&p, prefix).unwrap(), PREFIX_RENDER, b"sizes");
    assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())));
    // Appends beyond the prefix (the file's size and mtime move): still valid.
    bytes.extend_from_slice(&[9u8; 5_000]);
    std::fs::write(&p, &bytes).unwrap();
    assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())), "valid after an append");
    // Truncated below the prefix: stale, and warned about by name.
    let short = File::options().write(true).open(&p).unwrap();
    short.set_len(prefix - 1).unwrap();
    assert_eq!(of(&p, prefix), None);
    assert_eq!(load(&p), None, "truncated below the prefix");
    let path = c.entry_path(&name, PREFIX_RENDER).unwrap();
    assert!(lock(&c.warned).contains(&path));
    // Truncated and written again to beyond the prefix with other bytes: the fingerprint.
    let mut other = bytes.clone();
    other[(prefix - 10) as usize] ^= 0xff;
    std::fs::write(&p, &other).unwrap();
    assert_eq!(load(&p), None, "rewritten below the prefix");
    // Replaced by another file with the same bytes (a new inode): stale.
    std::fs::write(&p, &bytes).unwrap();
    assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())), "the same bytes again");
    let q = data.join("new");
    std::fs::write(&q, &bytes).unwrap();
    std::fs::rename(&q, &p).unwrap();
    assert_eq!(load(&p), None, "replaced by another file");
    // Stored again for the new file, then damaged: ignored.
    c.store(&of(&p, prefix).unwrap(), PREFIX_RENDER, b"sizes");
    assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())));
    let mut entry = std::fs::read(&path).unwrap();
    let last = entry.len() - 1;
    entry[last] ^= 0xff;
    std::fs::write(&path, &entry).unwrap();
    assert_eq!(load(&p), None, "a damaged payload");
    // A damaged header (even one claiming a prefix the file has): ignored too.
    std::fs::write(&path, b"TFSCACHE garbage").unwrap();
    assert_eq!(load(&p), None, "a foreign file");
    // An update of another prefix length replaces the entry without merging.
    c.store(&of(&p, prefix).unwrap(), PREFIX_RENDER, b"old");
    let longer = of(&p, prefix + 100).unwrap();
    c.update(
        &longer,
        PREFIX_RENDER,
        Box::new(|old| {
            assert_eq!(old, None, "the entry of another prefix is not handed over");
            Some(b"new".to_vec())
        }),
    );
    assert_eq!(load(&p), Some((prefix + 100, b"new".to_vec())));
    // Nothing was written into the data dir.
    let names: Vec<_> = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn entries_stay_within_the_bound_evicting_the_least_recently_used() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cache_in(tmp.path(), 10_000);
    let payload = vec![0u8; 1_000];
    for base in 0..30 {
        c.store(&ident(base), RENDER, &payload);
        // Distinct mtimes, oldest first; entry 0 is used again (and so refreshed).
        let path = c.entry_path(&ident(base), RENDER).unwrap();
        let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + base as u64);
        File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
    }
    let total: u64 =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(total <= 10_000, "entries take {total} bytes, bound 10000");
    assert_eq!(c.used(), total);
    // The newest survive, the oldest went first.
    assert!(c.load(&ident(29), RENDER).is_some());
    assert!(c.load(&ident(1), RENDER).is_none());
    // A new instance over a directory beyond its bound evicts at open.
    let small = cache_in(tmp.path(), 2_500);
    assert!(small.used() <= 2_500);
}

#[test]
fn an_unusable_directory_disables_the_cache_without_failing() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let c = cache_in(&file.join("sub"), 1 << 20);
    assert_eq!(c.dir(), None);
    c.store(&ident(0), RENDER, b"x");
    assert_eq!(c.load(&ident(0), RENDER), None);
    let off = SegmentCache::open(&CacheSettings { dir: None, max_bytes: 1 });
    assert_eq!(off.dir(), None);
}

#[test]
fn a_store_that_cannot_write_logs_and_leaves_no_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cache_in(tmp.path(), 1 << 20);
    // The directory disappears under the mount (someone deleted the cache): stores fail
    // quietly, loads miss.
    std::fs::remove_dir_all(tmp.path()).unwrap();
    c.store(&ident(0), RENDER, b"x");
    assert!(c.store_warned.load(Ordering::Relaxed));
    assert_eq!(c.load(&ident(0), RENDER), None);
}

#[test]
fn old_temporary_files_are_removed_at_open_and_young_ones_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join(".tmp-1-0");
    let young = tmp.path().join(".tmp-2-0");
    std::fs::write(&old, b"partial").unwrap();
    std::fs::write(&young, b"partial").unwrap();
    File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let _c = cache_in(tmp.path(), 1 << 20);
    assert!(!old.exists());
    assert!(young.exists());
}

#[test]
fn entries_of_every_kind_count_towards_the_bound_and_other_files_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cache_in(tmp.path(), 1 << 20);
    let prefix_txn = EntryKind { extension: "prefix-txn", tag: 5, prefix: true };
    let unknown = EntryKind { extension: "a-later-kind", tag: 200, prefix: false };
    c.store(&ident(0), prefix_txn, b"events");
    c.store(&ident(0), unknown, b"something");
    std::fs::write(tmp.path().join("README"), b"not an entry").unwrap();
    std::fs::write(tmp.path().join("0123456789abcdef-1.render"), b"short base").unwrap();
    let entries: u64 = [prefix_txn, unknown]
        .iter()
        .map(|k| std::fs::metadata(c.entry_path(&ident(0), *k).unwrap()).unwrap().len())
        .sum();
    // A new instance counts what it finds: every entry, whatever its kind, and nothing else.
    let again = cache_in(tmp.path(), 1 << 20);
    assert_eq!(again.used(), entries);
    assert!(dir::is_entry_name("0123456789abcdef-00000000000000000042.prefix-txn"));
    assert!(!dir::is_entry_name("0123456789abcdef-42.render"));
    assert!(!dir::is_entry_name("0123456789abcdeg-00000000000000000042.render"));
    assert!(!dir::is_entry_name("0123456789abcdef-00000000000000000042."));
    assert!(!dir::is_entry_name(".tmp-1-0"));
}

/// With the mount's executor set, queued updates are written by its `Store`-class tasks (no
/// thread of the cache's own), in the order queued (merges into one entry keep every part), and
/// an update still queued when the executor shuts down is written when its task is dropped, so
/// `flush` returns. Without an executor, an update is written in place, before the call
/// returns.
#[test]
fn with_an_executor_updates_run_as_its_tasks_in_order_and_none_is_lost_at_its_shutdown() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Arc::new(cache_in(tmp.path(), 1 << 20));
    c.store_later(ident(2), TXN, b"in place".to_vec());
    assert_eq!(c.load(&ident(2), TXN).as_deref(), Some(&b"in place"[..]), "no executor: now");
    let executor = topicfs_executor::Executor::new(1);
    c.set_executor(executor.clone());
    for i in 0..100u8 {
        c.update_later(
            ident(0),
            RENDER,
            Box::new(move |old| {
                let mut merged = old.unwrap_or_default();
                merged.push(i);
                Some(merged)
            }),
        );
    }
    c.flush();
    let expected: Vec<u8> = (0..100).collect();
    assert_eq!(c.load(&ident(0), RENDER), Some(expected));
    // Updates queued after the executor stopped are written by their dropped task.
    executor.shutdown();
    c.store_later(ident(1), TXN, b"late".to_vec());
    c.flush();
    assert_eq!(c.load(&ident(1), TXN).as_deref(), Some(&b"late"[..]));
}

/// Without an executor, updates written in place from several threads at once are written one
/// at a time: merges into one entry keep every part (a mount's cache writes on its executor;
/// tools and tests write in place).
#[test]
fn in_place_updates_from_several_threads_lose_no_part_of_a_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Arc::new(cache_in(tmp.path(), 1 << 20));
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                for i in 0..25u8 {
                    c.update_later(
                        ident(0),
                        RENDER,
                        Box::new(move |old| {
                            let mut merged = old.unwrap_or_default();
                            merged.push(t * 25 + i);
                            Some(merged)
                        }),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut got = c.load(&ident(0), RENDER).unwrap();
    got.sort_unstable();
    assert_eq!(got, (0..100).collect::<Vec<u8>>());
}
