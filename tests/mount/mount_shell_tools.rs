//! Real mounts driven by the tools users use: ls, cat, head, tail, wc, jq, stat and shell
//! redirection. Needs root (or fusermount3), /dev/fuse and jq.

use crate::common;

use std::fs::{self, OpenOptions};
use std::io::Write;

use common::{Follower, MountGuard, sh, sh_output};

/// A mount with topic `t` (one partition) created through `mkdir`.
fn mounted_with_topic(args: &[&str]) -> MountGuard {
    let m = MountGuard::foreground(args);
    sh(&format!("mkdir {}", m.path("t").display()));
    m
}

#[test]
fn ls_shows_topics_partitions_and_partition_files() {
    let m = mounted_with_topic(&["--partitions", "2"]);
    assert_eq!(sh(&format!("ls {}", m.mnt().display())), "t\n");
    assert_eq!(
        sh(&format!("ls {}", m.path("t").display())),
        "0\n1\nappend\nappend.json\nby-key\nby-time\nconfig\ngroups\nindexes\ninfo\noffsets\nwhere\n"
    );
    assert_eq!(
        sh(&format!("ls {}", m.path("t/0").display())),
        "append\nappend.json\nby-key\nby-offset\nby-time\ncheck\ninfo\nkeys\nlatest\nsegments\n"
    );
    assert_eq!(sh(&format!("ls {}", m.path("t/1/by-offset").display())), "0\n");
    assert!(sh(&format!("cat {}", m.path("t/info").display())).contains("partitions: 2\n"));
}

#[test]
fn appended_lines_are_read_back_by_cat_head_and_wc() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    sh(&format!("printf 'a\\nb\\nc\\n' >> {}/append", p.display()));
    assert_eq!(sh(&format!("cat {}/by-offset/0", p.display())), "a\nb\nc\n");
    assert_eq!(sh(&format!("head -n 2 {}/by-offset/0", p.display())), "a\nb\n");
    assert_eq!(sh(&format!("wc -l < {}/by-offset/0", p.display())).trim(), "3");
    assert_eq!(sh(&format!("cat {}/by-offset/-1", p.display())), "c\n");
    assert_eq!(sh(&format!("cat {}/by-offset/1..2", p.display())), "b\n");
    let info = sh(&format!("cat {}/info", p.display()));
    assert!(info.contains("log_end_offset: 3\n"), "{info}");
}

#[test]
fn truncating_redirect_appends_like_append_redirect() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    sh(&format!("printf 'one\\n' > {}/append", p.display()));
    sh(&format!("printf 'two\\n' > {}/append", p.display()));
    assert_eq!(sh(&format!("cat {}/by-offset/0", p.display())), "one\ntwo\n");
    assert_eq!(fs::metadata(p.join("append")).unwrap().len(), 0);
}

#[test]
fn stat_size_is_exactly_what_cat_reads() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    sh(&format!("seq 1 500 >> {}/append", p.display()));
    for name in ["0", "0.json", "0.raw", "-7", "10..20.json"] {
        let path = p.join("by-offset").join(name);
        let size = sh(&format!("stat -c %s '{}'", path.display()));
        let read = sh(&format!("cat '{}' | wc -c", path.display()));
        assert_eq!(size.trim(), read.trim(), "{name}");
    }
}

#[test]
fn tail_n_prints_the_last_records() {
    let m = mounted_with_topic(&["--segment-bytes", "4096"]);
    let p = m.path("t/0");
    sh(&format!("seq 1 3000 >> {}/append", p.display()));
    assert_eq!(sh(&format!("tail -n 3 {}/by-offset/0", p.display())), "2998\n2999\n3000\n");
    let segments = sh(&format!("ls {}/segments | grep -c '\\.log$'", p.display()));
    assert!(segments.trim().parse::<u32>().unwrap() > 1, "several segments: {segments}");
}

#[test]
fn tail_f_shows_records_appended_later() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    sh(&format!("printf 'early\\n' >> {}/append", p.display()));
    let stream = p.join("by-offset/0");
    let mut follower = Follower::start("tail", &["-f", "-s", "0.2", stream.to_str().unwrap()]);
    follower.wait_for("early\n");
    sh(&format!("printf 'late\\n' >> {}/append", p.display()));
    let out = follower.wait_for("late\n");
    assert_eq!(out, "early\nlate\n");
}

#[test]
fn tail_capital_f_follows_a_relative_name() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    sh(&format!("seq 1 20 >> {}/append", p.display()));
    let stream = p.join("by-offset/-2");
    let mut follower =
        Follower::start("tail", &["-F", "-n", "+1", "-s", "0.2", stream.to_str().unwrap()]);
    follower.wait_for("19\n20\n");
    sh(&format!("printf 'next\\n' >> {}/append", p.display()));
    let out = follower.wait_for("next\n");
    assert_eq!(out, "19\n20\nnext\n");
}

#[test]
fn jq_reads_json_streams_and_append_json_round_trips() {
    let m = mounted_with_topic(&[]);
    sh(&format!("mkdir {}", m.path("copy").display()));
    let a = m.path("t/0");
    let b = m.path("copy/0");
    let envelopes = concat!(
        r#"{"key":"k1","payload":"v1","headers":["h","x","n",null],"ts":1764662400000}"#,
        "\n",
        r#"{"key":null,"payload":"v2","ts":1764662401000}"#,
        "\n",
    );
    fs::write(a.join("append.json"), envelopes).unwrap();
    assert_eq!(sh(&format!("jq -r .payload {}/by-offset/0.json", a.display())), "v1\nv2\n");
    sh(&format!("cat {}/by-offset/0.json > {}/append.json", a.display(), b.display()));
    let fields = "jq -c '{key,payload,headers,ts,tstype}'";
    let original = sh(&format!("{fields} {}/by-offset/0.json", a.display()));
    let copied = sh(&format!("{fields} {}/by-offset/0.json", b.display()));
    assert_eq!(original, copied);
    assert!(copied.contains(r#""headers":["h","x","n",null]"#), "{copied}");
}

#[test]
fn json_payload_object_lets_jq_read_payload_fields_and_jq_output_appends_back() {
    let m = mounted_with_topic(&["-o", "json_payload=object"]);
    sh(&format!("mkdir {}", m.path("copy").display()));
    let a = m.path("t/0");
    let values = "{\"user\":\"alice\",\"n\":1,\"address\":{\"city\":\"Oslo\"}}\nplain text\n[1,2]\n42\nnull\n";
    fs::write(a.join("append"), values).unwrap();
    let json = a.join("by-offset/0.json");
    // No fromjson: the payload is the JSON value (text that is not JSON, and `null`, stay strings).
    let users = "jq -r 'select(.payload|type==\"object\")|.payload.user'";
    assert_eq!(sh(&format!("{users} {}", json.display())), "alice\n");
    assert_eq!(
        sh(&format!("jq -c .payload {}", json.display())),
        "{\"user\":\"alice\",\"n\":1,\"address\":{\"city\":\"Oslo\"}}\n\"plain text\"\n[1,2]\n42\n\"null\"\n"
    );
    let rendered = fs::read(&json).unwrap();
    assert_eq!(fs::metadata(&json).unwrap().len(), rendered.len() as u64, "the size is exact");
    // The topic-level merged stream and a filtered view show it the same way.
    let merged = m.path("t/by-time/0.json");
    assert_eq!(sh(&format!("{users} {}", merged.display())), "alice\n");
    let filtered = m.path("t/where/user=alice/0/by-offset/0.json");
    assert_eq!(sh(&format!("jq -r .payload.address.city {}", filtered.display())), "Oslo\n");
    // What jq prints appends back to the same values.
    sh(&format!("jq -c . {} > {}", json.display(), m.path("copy/0/append.json").display()));
    assert_eq!(fs::read_to_string(m.path("copy/0/by-offset/0")).unwrap(), values);
}

#[test]
fn partial_line_is_appended_at_close() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    let mut file = OpenOptions::new().append(true).open(p.join("append")).unwrap();
    file.write_all(b"whole\npart").unwrap();
    assert_eq!(fs::read_to_string(p.join("by-offset/0")).unwrap(), "whole\n");
    file.write_all(b"ial").unwrap();
    drop(file);
    assert_eq!(fs::read_to_string(p.join("by-offset/0")).unwrap(), "whole\npartial\n");
}

#[test]
fn segment_files_are_the_log_dir_files() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    sh(&format!("seq 1 100 >> {}/append", p.display()));
    let names = sh(&format!("ls {}/segments", p.display()));
    assert!(names.contains("00000000000000000000.log\n"), "{names}");
    assert!(names.contains("00000000000000000000.index\n"), "{names}");
    let mounted = fs::read(p.join("segments/00000000000000000000.log")).unwrap();
    let on_disk = fs::read(m.data().join("t-0/00000000000000000000.log")).unwrap();
    assert_eq!(mounted, on_disk);
    assert_eq!(fs::read(p.join("by-offset/0.raw")).unwrap(), on_disk);
}

#[test]
fn refusals_have_their_errno() {
    let m = mounted_with_topic(&["--max-message-bytes", "200"]);
    let p = m.path("t/0");
    sh(&format!("printf 'a\\n' >> {}/append", p.display()));
    let errno = |r: std::io::Result<()>| r.unwrap_err().raw_os_error().unwrap();
    assert_eq!(errno(fs::write(p.join("by-offset/0"), "x")), libc::EPERM);
    assert_eq!(errno(fs::remove_file(p.join("by-offset/0"))), libc::EPERM);
    assert_eq!(errno(fs::rename(p.join("info"), p.join("info2"))), libc::EPERM);
    assert_eq!(errno(fs::write(p.join("segments/new"), "x")), libc::EPERM);
    assert_eq!(errno(fs::metadata(p.join("by-offset/nope")).map(drop)), libc::ENOENT);
    assert_eq!(errno(fs::metadata(p.join("by-offset/99")).map(drop)), libc::ENOENT);
    assert_eq!(errno(fs::write(p.join("append"), format!("{}\n", "x".repeat(300)))), libc::EFBIG);
    assert_eq!(errno(fs::write(p.join("append.json"), "{bad\n")), libc::EINVAL);
    // Nothing of the refused writes was appended.
    assert_eq!(fs::read_to_string(p.join("by-offset/0")).unwrap(), "a\n");
    let out = sh_output(&format!("mkdir {}/by-offset/x", p.display()));
    assert!(!out.status.success());
}

#[test]
fn mkdir_adds_the_next_partition() {
    let m = mounted_with_topic(&[]);
    sh(&format!("mkdir {}", m.path("t/1").display()));
    assert!(!sh_output(&format!("mkdir {}", m.path("t/5").display())).status.success());
    sh(&format!("printf 'p1\\n' >> {}", m.path("t/1/append").display()));
    assert_eq!(sh(&format!("cat {}", m.path("t/1/by-offset/0").display())), "p1\n");
    assert!(m.data().join("t-1").is_dir());
}

#[test]
fn read_only_mount_refuses_appends_with_erofs() {
    let m = mounted_with_topic(&[]);
    sh(&format!("printf 'kept\\n' >> {}", m.path("t/0/append").display()));
    let dirs = m.unmount();
    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    assert_eq!(sh(&format!("cat {}", m.path("t/0/by-offset/0").display())), "kept\n");
    let err = fs::write(m.path("t/0/append"), "x\n").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    let err = fs::create_dir(m.path("u")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
}

#[test]
fn concurrent_readers_and_writers_with_several_threads() {
    let m = mounted_with_topic(&["--threads", "4"]);
    let p = m.path("t/0");
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let append = p.join("append");
            std::thread::spawn(move || {
                for i in 0..50 {
                    fs::write(&append, format!("w{w}-{i}\n")).unwrap();
                }
            })
        })
        .collect();
    for _ in 0..20 {
        let read = fs::read_to_string(p.join("by-offset/0")).unwrap();
        assert!(read.is_empty() || read.ends_with('\n'));
    }
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(sh(&format!("wc -l < {}/by-offset/0", p.display())).trim(), "200");
}

#[test]
fn by_time_names_open_streams_from_that_time() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    let envelopes: String = [(1, 1764662400000_i64), (2, 1764662401000), (3, 1764662402000)]
        .iter()
        .map(|(v, ts)| format!("{{\"payload\":\"v{v}\",\"ts\":{ts}}}\n"))
        .collect();
    fs::write(p.join("append.json"), envelopes).unwrap();
    assert_eq!(sh(&format!("ls {}/by-time", p.display())), "2025-12-02T08:00:00.000Z\n");
    let by_time = p.join("by-time");
    let cat = |name: &str| sh(&format!("cat '{}/{name}'", by_time.display()));
    assert_eq!(cat("2025-12-02T08:00:00.000Z"), "v1\nv2\nv3\n");
    assert_eq!(cat("1764662401000"), "v2\nv3\n");
    assert_eq!(cat("1764662400500..1764662402000"), "v2\n");
    assert_eq!(cat("2030-01-01"), "");
}

#[test]
fn cp_and_grep_read_streams_to_the_current_end() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    sh(&format!("seq 1 2000 >> {}/append", p.display()));
    let copy = m.dirs_root().join("copy");
    sh(&format!("cp {}/by-offset/0 {}", p.display(), copy.display()));
    assert_eq!(fs::read(&copy).unwrap(), fs::read(p.join("by-offset/0")).unwrap());
    assert_eq!(sh(&format!("grep -c 7 {}/by-offset/0", p.display())).trim(), "542");
    assert_eq!(sh(&format!("cmp {}/by-offset/0 {}", p.display(), copy.display())), "");
}

#[test]
fn child_processes_closing_an_inherited_descriptor_do_not_end_the_line() {
    let m = mounted_with_topic(&[]);
    let p = m.path("t/0");
    let script = format!(
        "{{ printf part; /bin/true; printf 'ial\\n'; printf 'next'; }} >> {}/append",
        p.display()
    );
    sh(&script);
    assert_eq!(fs::read_to_string(p.join("by-offset/0")).unwrap(), "partial\nnext\n");
}

/// Dirs holding topics `names`, each with `seq 1 20000` in partition 0 (one segment), written
/// by a mount that is gone, without what it kept beside the segments (as a broker would have
/// written them): a later mount without a cache dir has sized none of their streams, and sizes
/// none in the background (no sealed segment) until it appends.
fn unsized_topics(names: &[&str]) -> common::Dirs {
    let m = MountGuard::foreground(&["-o", "cache_dir=none"]);
    for name in names {
        let p = m.path(name);
        sh(&format!("mkdir {} && seq 1 20000 >> {}/0/append", p.display(), p.display()));
    }
    let dirs = m.unmount();
    for name in names {
        common::strip_beside_entries(&dirs.data().join(format!("{name}-0")));
    }
    dirs
}

/// With `--sizing-budget 1K`, a stream whose end is farther than that from where sizing
/// stopped shows `st_size` 0; every shell tool still reads exactly its records.
#[test]
fn shell_tools_read_streams_whose_size_is_not_yet_known() {
    let topics = ["cat", "head", "wcc", "wcl", "tailn", "jq", "grep", "middle"];
    let m = MountGuard::foreground_on(
        unsized_topics(&topics),
        &["--sizing-budget", "1K", "-o", "cache_dir=none"],
    );
    let expected: String = (1..=20_000).map(|i| format!("{i}\n")).collect();
    // A topic per tool, so each meets a stream nobody has read (sized) yet.
    let fresh = |name: &str| {
        let p = m.path(name);
        let stream = p.join("0/by-offset/0");
        assert_eq!(sh(&format!("stat -c %s {}", stream.display())), "0\n", "{name}");
        p.join("0")
    };
    let p = fresh("cat");
    assert_eq!(sh(&format!("cat {}/by-offset/0", p.display())), expected);
    // Read to its end, the stream is sized: stat shows exactly what cat read.
    let size = sh(&format!("stat -c %s {}/by-offset/0", p.display()));
    assert_eq!(size.trim(), expected.len().to_string());
    let p = fresh("head");
    assert_eq!(sh(&format!("head -n 3 {}/by-offset/0", p.display())), "1\n2\n3\n");
    assert_eq!(sh(&format!("head -c 6 {}/by-offset/0", p.display())), "1\n2\n3\n");
    let p = fresh("wcc");
    assert_eq!(
        sh(&format!("wc -c < {}/by-offset/0", p.display())).trim(),
        expected.len().to_string()
    );
    let p = fresh("wcl");
    assert_eq!(sh(&format!("wc -l < {}/by-offset/0", p.display())).trim(), "20000");
    let p = fresh("tailn");
    assert_eq!(sh(&format!("tail -n 3 {}/by-offset/0", p.display())), "19998\n19999\n20000\n");
    let p = fresh("jq");
    let values = sh(&format!("jq -r .payload {}/by-offset/0.json", p.display()));
    assert_eq!(values, expected);
    let p = fresh("grep");
    assert_eq!(sh(&format!("grep -c 7 {}/by-offset/0", p.display())).trim(), {
        expected.lines().filter(|l| l.contains('7')).count().to_string()
    });
    // The middle of the partition: size not yet known, first record at once.
    let p = fresh("middle");
    let middle = p.join("by-offset/10000.json");
    assert_eq!(sh(&format!("stat -c %s {}", middle.display())), "0\n");
    assert_eq!(sh(&format!("head -n 1 {} | jq -r .payload", middle.display())), "10001\n");
    assert_eq!(sh(&format!("head -n 1 {}", p.join("by-offset/10000").display())), "10001\n");
    // The last records by name: within the budget, exact at once.
    let last = p.join("by-offset/-2");
    assert_eq!(sh(&format!("stat -c %s {}", last.display())), "12\n");
    assert_eq!(sh(&format!("cat {}", last.display())), "19999\n20000\n");
}

#[test]
fn tail_f_follows_a_stream_whose_size_was_not_yet_known() {
    let m = MountGuard::foreground_on(
        unsized_topics(&["t"]),
        &["--sizing-budget", "1K", "-o", "cache_dir=none"],
    );
    let p = m.path("t");
    let stream = p.join("0/by-offset/0");
    assert_eq!(sh(&format!("stat -c %s {}", stream.display())), "0\n");
    let mut follower = Follower::start("tail", &["-f", "-s", "0.2", stream.to_str().unwrap()]);
    let last: String = (19_991..=20_000).map(|i| format!("{i}\n")).collect();
    follower.wait_for("20000\n");
    sh(&format!("seq 20001 40000 >> {}/0/append", p.display()));
    sh(&format!("printf 'late\\n' >> {}/0/append", p.display()));
    let out = follower.wait_for("late\n");
    let grown: String = (20_001..=40_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(out, format!("{last}{grown}late\n"));
}
