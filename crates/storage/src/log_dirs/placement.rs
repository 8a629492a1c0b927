//! Where a broker with several log dirs puts a new partition: Kafka's
//! `LogManager.nextLogDirs`, as a pure function of the dirs' paths and partition counts.
//!
//! # The rule, as Kafka trunk (4.0.0-SNAPSHOT, 2024-10-25) writes it
//!
//! `core/src/main/scala/kafka/log/LogManager.scala`, `nextLogDirs` (lines 1386-1400 of the
//! mirrored commit 1eb7644349cb):
//!
//! ```scala
//! if (_liveLogDirs.size == 1) List(_liveLogDirs.peek())
//! else {
//!   val logCounts = allLogs.groupBy(_.parentDir).map { case (parent, logs) => parent -> logs.size }
//!   val zeros = _liveLogDirs.asScala.map(dir => (dir.getPath, 0)).toMap
//!   val dirCounts = (zeros ++ logCounts).toBuffer
//!   dirCounts.sortBy(_._2).map { case (path, _) => new File(path) }.toList
//! }
//! ```
//!
//! `getOrCreateLog` (same file, line 1035; `nextLogDirs()` at line 1063) creates the partition
//! directory in the first dir of that list where the creation succeeds (and only when neither a
//! preferred dir nor a target directory id is given). `allLogs` (line 1449) is the current plus
//! the `-future` logs, so a partition being moved counts in both dirs.
//!
//! So the dir with the fewest partitions wins, and a tie goes to the dir met first when iterating
//! the Scala map `zeros ++ logCounts`. `sortBy` is stable: Scala 2.13 `SeqOps.sortBy` is
//! `sorted(ord on f)` (`src/library/scala/collection/Seq.scala` line 783) and `sorted` copies
//! to an array and calls `java.util.Arrays.sort(Object[], Comparator)` (line 728), a stable
//! merge sort. `toBuffer` keeps the map's iteration order (`IterableOnce.scala` line 1489,
//! `mutable.Buffer.from` = `ArrayBuffer.from`).
//!
//! # The iteration order of `zeros ++ logCounts` (Scala 2.13.15, Kafka's `scalaVersion`)
//!
//! Checked in the Scala sources at tag v2.13.15 (`src/library/scala/collection/...`):
//!
//! - `zeros` is built by `IterableOnce.toMap` (`IterableOnce.scala` line 1461) =
//!   `immutable.Map.from` (`immutable/Map.scala` line 210), which for a non-map source uses
//!   `MapBuilderImpl` (`immutable/Map.scala` line 661): up to 4 entries it builds `Map1`..`Map4`
//!   by `updated`; at the 5th distinct key it switches to a `HashMapBuilder`, adding the
//!   `Map4`'s entries in order (`Map4.buildTo`, line 621) and then the rest.
//! - `Map1`..`Map4` iterate in insertion order (`Map2Iterator`, `Map4Iterator`, lines 336 and
//!   559), i.e. `log.dirs` order, and their `updated` of an existing key keeps its slot
//!   (`Map2.updated` line 351, `Map4.updated` line 576).
//! - `logCounts` is an `immutable.HashMap` whatever its size: `groupBy` builds its result by
//!   `HashMap.empty.updated` (`Iterable.scala` line 557) and `.map` on a `HashMap` builds a
//!   `HashMap`. `zeros ++ logCounts` for a `Map1`..`Map4` is `MapOps.concat`
//!   (`immutable/Map.scala` line 157): `updated` of each of `logCounts`'s keys, all of which
//!   are already in `zeros`, so the order stays `log.dirs` order.
//! - More than 4 dirs: `zeros` is a CHAMP `HashMap` and `++` is `HashMap.concat`
//!   (`immutable/HashMap.scala` line 164). Its iteration order depends only on the key set,
//!   not on the values: a CHAMP trie is canonical. A node at depth `d` looks at the 5 bits
//!   `(hash >>> 5d) & 31` (`Node.maskFrom`, `immutable/ChampCommon.scala` line 31) of the
//!   *improved* hash of each key; a key alone on its 5 bits is stored inline in the node
//!   (payload), two or more sharing them go to one sub-node (`mergeTwoKeyValPairs`,
//!   `immutable/HashMap.scala` line 913). Payload and sub-nodes are each kept in ascending
//!   bit position (`dataIndex`/`nodeIndex`, line 949; `getKey` line 652, `getNode` line 661).
//!   The iterator (`ChampBaseIterator`, `immutable/ChampCommon.scala` lines 107-187) yields a
//!   node's payload first, then descends into its sub-nodes in order, depth first (pre-order).
//! - The improved hash is `scala.collection.Hashing.improve(key.##)` (`Hashing.scala` line 21;
//!   `HashMap.updated`, `immutable/HashMap.scala` line 150), and `##` of a `String` is Java's
//!   `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over its UTF-16 code units.
//! - Keys with the same 32-bit hash (e.g. `.../Aa` and `.../BB`) land, below depth 6
//!   (shift >= 32), in a `HashCollisionMapNode` (line 1851) that keeps insertion order: the
//!   builder appends (`HashMapBuilder.update`, line 2276). `HashCollisionMapNode.concat`
//!   (line 2003) puts `logCounts`'s colliding keys first, then `zeros`'s others; after the
//!   sort by count this matters only between colliding dirs with the same non-zero count, whose
//!   order comes from Kafka's in-memory log pool and is not modelled here: they keep
//!   `log.dirs` order.
//!
//! # The keys
//!
//! The map keys are `File.getPath` of the live dirs, which are
//! `new File(entry).getAbsoluteFile` of the `log.dirs` entries (`LogManager.apply`, line 1581):
//! the path as configured, made absolute against the broker's working directory and normalized
//! by `java.io.File` (repeated and trailing `/` removed: [`java_file_path`]); not canonicalized
//! (symbolic links are kept). Tie-breaking therefore depends on the paths as the *broker* spells
//! them; a mount that names the same dirs differently may break ties differently.

/// The live log dirs in the order Kafka's `LogManager.nextLogDirs` tries them for a new
/// partition: indexes into `dirs`, each (path as given in `log.dirs`, partitions it holds).
///
/// Pass only the live (online) dirs, in `log.dirs` order: Kafka's `_liveLogDirs` is a queue
/// filled in that order (`createAndValidateLogDirs`, `LogManager.scala` line 175) from which a
/// failed dir is removed (line 228). The path is used as Kafka's map key: pass it absolute and
/// normalized as `java.io.File` does ([`java_file_path`]). The count includes `-future` logs
/// being moved into the dir.
/// Paths are expected to be distinct (Kafka refuses duplicate log dirs); every index is
/// returned exactly once whatever the input. One dir (or none) is returned as is.
pub fn next_log_dirs(dirs: &[(&str, usize)]) -> Vec<usize> {
    let mut order: Vec<usize> = if dirs.len() <= 4 {
        // Map1..Map4: insertion (log.dirs) order; also the single-dir shortcut.
        (0..dirs.len()).collect()
    } else {
        let paths: Vec<&str> = dirs.iter().map(|(path, _)| *path).collect();
        champ_iteration_order(&paths)
    };
    // `sortBy(_._2)`: stable, like Rust's `sort_by_key`.
    order.sort_by_key(|&index| dirs.get(index).map_or(0, |(_, count)| *count));
    order
}

/// Java's `String.hashCode`: `h = 31 * h + c` over the UTF-16 code units, wrapping.
pub(crate) fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// `scala.collection.Hashing.improve` (Scala 2.13 `Hashing.scala` line 21), the hash a CHAMP
/// `HashMap` places keys by. Java's `<<` and `+` wrap; `>>>` is the logical shift.
pub(crate) fn scala_improve(hcode: i32) -> i32 {
    let mut h = hcode.wrapping_add(!hcode.wrapping_shl(9));
    h ^= ((h as u32) >> 14) as i32;
    h = h.wrapping_add(h.wrapping_shl(4));
    h ^ ((h as u32) >> 10) as i32
}

/// The order in which a Scala 2.13 immutable `HashMap` (CHAMP) with these `String` keys,
/// inserted in this order, iterates them: indexes into `keys`. See the module documentation for
/// the rule and where it is written in the Scala sources.
pub(crate) fn champ_iteration_order(keys: &[&str]) -> Vec<usize> {
    let hashed: Vec<(usize, u32)> = keys
        .iter()
        .enumerate()
        .map(|(index, key)| (index, scala_improve(java_string_hash(key)) as u32))
        .collect();
    let mut out = Vec::with_capacity(keys.len());
    trie_order(&hashed, 0, &mut out);
    out
}

/// Pre-order walk of the canonical CHAMP node holding `entries` (all sharing the hash bits
/// below `shift`), in insertion order: the entries alone on their 5 bits at `shift` (the
/// node's payload) in ascending bit position, then each group of two or more (a sub-node) in
/// ascending bit position, recursively. At `shift >= 32` the entries have equal hashes: a
/// collision node, insertion order.
fn trie_order(entries: &[(usize, u32)], shift: u32, out: &mut Vec<usize>) {
    if shift >= 32 {
        out.extend(entries.iter().map(|(index, _)| *index));
        return;
    }
    let mut groups: [Vec<(usize, u32)>; 32] = std::array::from_fn(|_| Vec::new());
    for &(index, hash) in entries {
        groups[((hash >> shift) & 31) as usize].push((index, hash));
    }
    for group in &groups {
        if let [(index, _)] = group.as_slice() {
            out.push(*index);
        }
    }
    for group in &groups {
        if group.len() > 1 {
            trie_order(group, shift + 5, out);
        }
    }
}

/// A path as `java.io.File` holds it (`UnixFileSystem.normalize`): repeated `/` collapsed,
/// trailing `/` removed (a path of only `/` stays `/`). Nothing else: no `.`/`..` handling, no
/// symbolic links resolved.
pub fn java_file_path(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() && !path.is_empty() {
        return "/".to_string();
    }
    let mut out = String::with_capacity(trimmed.len());
    let mut previous_slash = false;
    for c in trimmed.chars() {
        if c == '/' && previous_slash {
            continue;
        }
        previous_slash = c == '/';
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's `String.hashCode` and Scala's `Hashing.improve` of `s`, as printed by a JVM
    /// (OpenJDK 17, `"s".hashCode()` and `improve` typed in from `Hashing.scala`), with the
    /// improved hash's 5-bit groups from the lowest.
    struct Jvm {
        s: &'static str,
        hash: i32,
        improved: i32,
        groups: [u32; 7],
    }

    const fn jvm(s: &'static str, hash: i32, improved: i32, groups: [u32; 7]) -> Jvm {
        Jvm { s, hash, improved, groups }
    }

    /// Printed by the JVM (see [`Jvm`]); the tests below rely on these group values.
    const JVM: &[Jvm] = &[
        jvm("hello", 99162322, 1864930842, [26, 16, 5, 17, 18, 23, 1]),
        jvm("", 0, -8130816, [0, 24, 27, 7, 24, 31, 3]),
        jvm("/data/kafka-é", -281583540, -2015325496, [8, 22, 4, 1, 30, 3, 2]),
        jvm("/data/𝄞", 1752625376, 602569627, [27, 28, 30, 20, 30, 17, 0]),
        jvm("/data/Aa", 1750855094, -1199024456, [24, 21, 21, 16, 8, 28, 2]),
        jvm("/data/BB", 1750855094, -1199024456, [24, 21, 21, 16, 8, 28, 2]),
        jvm("/var/lib/kafka/data-0", 1382995383, -1059177493, [11, 31, 14, 28, 13, 0, 3]),
        jvm("/var/lib/kafka/data-1", 1382995384, -1059186222, [18, 14, 6, 28, 13, 0, 3]),
        jvm("/var/lib/kafka/data-2", 1382995385, -1059223702, [10, 27, 1, 27, 13, 0, 3]),
        jvm("/var/lib/kafka/data-3", 1382995386, -1059199357, [3, 20, 25, 27, 13, 0, 3]),
        jvm("/var/lib/kafka/data-4", 1382995387, -1059364111, [17, 23, 24, 22, 13, 0, 3]),
        jvm("/var/lib/kafka/data-5", 1382995388, -1059372856, [8, 6, 16, 22, 13, 0, 3]),
        jvm("/var/lib/kafka/data-6", 1382995389, -1059378939, [5, 8, 10, 22, 13, 0, 3]),
        jvm("/var/lib/kafka/data-7", 1382995390, -1059385475, [29, 27, 3, 22, 13, 0, 3]),
        jvm("/var/lib/kafka/data-10", -76816008, 1579675915, [11, 8, 28, 15, 2, 15, 1]),
        jvm("/mnt/disk1", -342256439, 1068432332, [12, 30, 30, 29, 26, 31, 0]),
        jvm("/mnt/disk2", -342256438, 1068439973, [5, 13, 6, 30, 26, 31, 0]),
        jvm("/mnt/disk3", -342256437, 1060165888, [0, 8, 22, 1, 19, 31, 0]),
        jvm("/mnt/disk4", -342256436, 1060190985, [9, 24, 14, 2, 19, 31, 0]),
        jvm("/mnt/disk5", -342256435, 1060183319, [23, 8, 7, 2, 19, 31, 0]),
    ];

    fn groups_of(s: &str) -> [u32; 7] {
        JVM.iter()
            .find(|j| j.s == s)
            .map(|j| j.groups)
            .unwrap_or_else(|| panic!("no JVM value for {s:?}"))
    }

    #[test]
    fn placement_java_hash_and_improve_match_the_jvm() {
        for j in JVM {
            assert_eq!(java_string_hash(j.s), j.hash, "hashCode of {:?}", j.s);
            assert_eq!(scala_improve(j.hash), j.improved, "improve of {:?}", j.s);
            let improved = j.improved as u32;
            for (depth, group) in j.groups.iter().enumerate() {
                assert_eq!((improved >> (5 * depth)) & 31, *group, "{:?} depth {depth}", j.s);
            }
        }
        // "é" is one UTF-16 unit (0xE9), "𝄞" two (0xD834 0xDD1E): not bytes, not code points.
        assert_ne!(
            java_string_hash("/data/𝄞"),
            "/data/𝄞".chars().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
        );
    }

    #[test]
    fn placement_fewest_partitions_first() {
        let dirs = [("/d/a", 3), ("/d/b", 1), ("/d/c", 2)];
        assert_eq!(next_log_dirs(&dirs), vec![1, 2, 0]);
        let dirs = [
            ("/mnt/disk1", 7),
            ("/mnt/disk2", 0),
            ("/mnt/disk3", 5),
            ("/mnt/disk4", 2),
            ("/mnt/disk5", 9),
        ];
        assert_eq!(next_log_dirs(&dirs), vec![1, 3, 2, 0, 4]);
    }

    #[test]
    fn placement_one_dir_or_none() {
        assert_eq!(next_log_dirs(&[("/only", 12)]), vec![0]);
        assert_eq!(next_log_dirs(&[]), Vec::<usize>::new());
    }

    #[test]
    fn placement_ties_among_up_to_four_dirs_keep_log_dirs_order() {
        // Paths chosen so that hash order differs from log.dirs order: with 4 dirs the Map4
        // keeps insertion order, not the CHAMP order (disk3 (group 0) before disk2 (5) ...).
        let four = ["/mnt/disk1", "/mnt/disk2", "/mnt/disk3", "/mnt/disk4"];
        assert_ne!(champ_iteration_order(&four), vec![0, 1, 2, 3]);
        for n in 2..=4 {
            let dirs: Vec<(&str, usize)> = four[..n].iter().map(|p| (*p, 4)).collect();
            assert_eq!(next_log_dirs(&dirs), (0..n).collect::<Vec<_>>(), "{n} dirs");
        }
        let dirs = [("/mnt/disk4", 1), ("/mnt/disk3", 0), ("/mnt/disk2", 1), ("/mnt/disk1", 0)];
        assert_eq!(next_log_dirs(&dirs), vec![1, 3, 0, 2]);
    }

    /// Expected order of a set of paths whose improved hashes all differ in their lowest 5
    /// bits: the root node holds them all as payload, sorted by those bits.
    fn sorted_by_group0(paths: &[&str]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..paths.len()).collect();
        order.sort_by_key(|&i| groups_of(paths[i])[0]);
        order
    }

    #[test]
    fn placement_ties_among_five_to_eight_dirs_follow_the_hash_trie() {
        let paths = [
            "/var/lib/kafka/data-0",
            "/var/lib/kafka/data-1",
            "/var/lib/kafka/data-2",
            "/var/lib/kafka/data-3",
            "/var/lib/kafka/data-4",
            "/var/lib/kafka/data-5",
            "/var/lib/kafka/data-6",
            "/var/lib/kafka/data-7",
        ];
        for n in 5..=8 {
            let set = &paths[..n];
            // Trie shape checked: lowest 5 bits all distinct, so one root node of payload.
            let mut low: Vec<u32> = set.iter().map(|p| groups_of(p)[0]).collect();
            low.sort_unstable();
            low.dedup();
            assert_eq!(low.len(), n);
            let expected = sorted_by_group0(set);
            let dirs: Vec<(&str, usize)> = set.iter().map(|p| (*p, 2)).collect();
            assert_eq!(next_log_dirs(&dirs), expected, "{n} dirs");
        }
        // By hand, for all 8 (groups 11 18 10 3 17 8 5 29): 3 6 5 2 0 4 1 7.
        let dirs: Vec<(&str, usize)> = paths.iter().map(|p| (*p, 0)).collect();
        assert_eq!(next_log_dirs(&dirs), vec![3, 6, 5, 2, 0, 4, 1, 7]);
    }

    #[test]
    fn placement_two_dirs_sharing_the_lowest_bits_come_after_the_inline_ones() {
        // data-0 and data-10 share their lowest 5 bits (11) and differ in the next 5 (31, 8):
        // they go to one sub-node of the root, iterated after the root's payload (data-3: 3,
        // data-2: 10, data-1: 18), even though data-1's bits (18) are higher than theirs (11).
        let paths = [
            "/var/lib/kafka/data-0",
            "/var/lib/kafka/data-1",
            "/var/lib/kafka/data-2",
            "/var/lib/kafka/data-3",
            "/var/lib/kafka/data-10",
        ];
        let g = |i: usize| groups_of(paths[i]);
        assert_eq!(g(0)[0], g(4)[0]);
        assert_ne!(g(0)[1], g(4)[1]);
        let mut inline: Vec<usize> = vec![1, 2, 3];
        inline.sort_by_key(|&i| g(i)[0]);
        let mut sub: Vec<usize> = vec![0, 4];
        sub.sort_by_key(|&i| g(i)[1]);
        let expected: Vec<usize> = inline.into_iter().chain(sub).collect();
        assert_eq!(expected, vec![3, 2, 1, 4, 0]);
        let dirs: Vec<(&str, usize)> = paths.iter().map(|p| (*p, 1)).collect();
        assert_eq!(next_log_dirs(&dirs), expected);
        // Counts still come first: data-0 emptier than the rest wins.
        let mut dirs = dirs;
        dirs[0].1 = 0;
        assert_eq!(next_log_dirs(&dirs), vec![0, 3, 2, 1, 4]);
    }

    #[test]
    fn placement_equal_hashes_keep_log_dirs_order() {
        // "/data/Aa" and "/data/BB" have the same String.hashCode: a collision node at the
        // bottom of the trie, in insertion order, after the root's payload.
        let paths = ["/data/BB", "/mnt/disk1", "/data/Aa", "/mnt/disk2", "/mnt/disk3"];
        assert_eq!(groups_of(paths[0]), groups_of(paths[2]));
        // Root payload by lowest bits: disk3 (0), disk2 (5), disk1 (12); then BB, Aa.
        let dirs: Vec<(&str, usize)> = paths.iter().map(|p| (*p, 0)).collect();
        assert_eq!(next_log_dirs(&dirs), vec![4, 3, 1, 0, 2]);
        let swapped = [paths[2], paths[1], paths[0], paths[3], paths[4]];
        let dirs: Vec<(&str, usize)> = swapped.iter().map(|p| (*p, 0)).collect();
        assert_eq!(next_log_dirs(&dirs), vec![4, 3, 1, 0, 2]);
    }

    /// A second model of the trie, built the way Scala's `HashMap` builds it: keys inserted
    /// one by one, a key landing on an occupied payload slot pushing both one level down
    /// (`mergeTwoKeyValPairs`), below shift 30 a collision list in insertion order.
    enum Slot {
        Data(usize, u32),
        Node(std::collections::BTreeMap<u32, Slot>),
        Collision(Vec<usize>),
    }

    fn merge(a: (usize, u32), b: (usize, u32), shift: u32) -> Slot {
        if shift >= 32 {
            return Slot::Collision(vec![a.0, b.0]);
        }
        let (ma, mb) = ((a.1 >> shift) & 31, (b.1 >> shift) & 31);
        let mut node = std::collections::BTreeMap::new();
        if ma == mb {
            node.insert(ma, merge(a, b, shift + 5));
        } else {
            node.insert(ma, Slot::Data(a.0, a.1));
            node.insert(mb, Slot::Data(b.0, b.1));
        }
        Slot::Node(node)
    }

    fn insert(node: &mut std::collections::BTreeMap<u32, Slot>, key: (usize, u32), shift: u32) {
        let mask = (key.1 >> shift) & 31;
        match node.remove(&mask) {
            None => {
                node.insert(mask, Slot::Data(key.0, key.1));
            }
            Some(Slot::Data(index, hash)) => {
                node.insert(mask, merge((index, hash), key, shift + 5));
            }
            Some(Slot::Node(mut child)) => {
                // Never at shift 30: two keys sharing all bits there meet in a collision list.
                insert(&mut child, key, shift + 5);
                node.insert(mask, Slot::Node(child));
            }
            Some(Slot::Collision(mut list)) => {
                list.push(key.0);
                node.insert(mask, Slot::Collision(list));
            }
        }
    }

    fn walk(node: &std::collections::BTreeMap<u32, Slot>, out: &mut Vec<usize>) {
        for slot in node.values() {
            if let Slot::Data(index, _) = slot {
                out.push(*index);
            }
        }
        for slot in node.values() {
            match slot {
                Slot::Data(..) => {}
                Slot::Node(child) => walk(child, out),
                Slot::Collision(list) => out.extend(list),
            }
        }
    }

    proptest::proptest! {
        /// Hashes drawn from two values per 5-bit group, so keys share long prefixes and some
        /// collide entirely: the grouping walk equals the insertion-built trie's walk.
        #[test]
        fn placement_trie_order_equals_an_insertion_built_trie(
            groups in proptest::collection::vec(proptest::array::uniform7(0u32..2), 1..16)
        ) {
            let hashed: Vec<(usize, u32)> = groups
                .iter()
                .enumerate()
                .map(|(i, g)| (i, g.iter().enumerate().fold(0u32, |h, (d, v)| h | (v << (5 * d)))))
                .collect();
            let mut root = std::collections::BTreeMap::new();
            for key in &hashed {
                insert(&mut root, *key, 0);
            }
            let mut expected = Vec::new();
            walk(&root, &mut expected);
            let mut actual = Vec::new();
            trie_order(&hashed, 0, &mut actual);
            proptest::prop_assert_eq!(actual, expected);
        }
    }

    #[test]
    fn placement_java_file_path_normalizes_like_java_io_file() {
        assert_eq!(java_file_path("/data//kafka/"), "/data/kafka");
        assert_eq!(java_file_path("/data/kafka///"), "/data/kafka");
        assert_eq!(java_file_path("///"), "/");
        assert_eq!(java_file_path("/"), "/");
        assert_eq!(java_file_path(""), "");
        assert_eq!(java_file_path("/a/./b/../c"), "/a/./b/../c");
    }
}
