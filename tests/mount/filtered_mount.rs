//! `<topic>/where/<filter>/` through real mounts, driven with the tools users use (issue 46):
//! `cat` of a filtered stream is exactly what `jq` keeps from the unfiltered one, on a
//! read-write mount and on a read-only remount of the same data dir; `tail -f` of a filtered
//! stream shows exactly the new matches; a filter that does not parse is `EINVAL`.

use std::fs;

use crate::common::{Follower, MountGuard, sh, sh_output};

/// `n` compact JSON lines (a plain text line every 11th): what the filters look at.
fn orders(n: usize) -> String {
    (0..n)
        .map(|i| {
            if i % 11 == 4 {
                format!("plain line {i}\n")
            } else {
                format!(
                    "{{\"id\":{i},\"user\":\"user-{}\",\"item\":\"{}\",\"qty\":{},\"address\":{{\"city\":\"{}\"}},\"tags\":[\"t{}\",\"x\"]}}\n",
                    i % 50,
                    ["pen", "cup", "hat"][i % 3],
                    i % 7,
                    ["Oslo", "Lima", "Pune"][i % 3],
                    i % 4
                )
            }
        })
        .collect()
}

/// Filters with the `jq` expression that keeps the same records (non-JSON lines skipped by
/// `fromjson?`).
const CASES: &[(&str, &str)] = &[
    ("user=user-42", r#"select(.user=="user-42")"#),
    ("qty>=5", "select(.qty>=5)"),
    ("qty<2,item=hat", r#"select(.qty<2 and .item=="hat")"#),
    ("address.city=Lima", r#"select(.address.city=="Lima")"#),
    ("tags.0=t3", r#"select(.tags[0]=="t3")"#),
    ("item~u", r#"select(.item|contains("u"))"#),
    ("user!=user-1", r#"select(has("user") and .user!="user-1")"#),
    // The extensions (SEMANTICS.md [T-filter-extensions]).
    ("user=user-42,or,qty<2,item=hat", r#"select(.user=="user-42" or (.qty<2 and .item=="hat"))"#),
    ("item!~u", r#"select(has("item") and (.item|contains("u")|not))"#),
    ("user=user-4%*", r#"select(.user|strings|startswith("user-4"))"#),
    ("user=%re:^user-[0-9]7$", r#"select(.user|strings|test("^user-[0-9]7$"))"#),
];

/// Checks every case on the mount `m` (topic `orders`, partition 0).
fn check_against_jq(m: &MountGuard) {
    let plain = m.path("orders/0/by-offset/0");
    let json = m.path("orders/0/by-offset/0.json");
    for (filter, jq) in CASES {
        let dir = m.path(&format!("orders/where/{filter}/0/by-offset"));
        let want = sh(&format!("jq -cR 'fromjson? | {jq}' {}", plain.display()));
        assert!(!want.is_empty(), "{filter}: the case keeps something");
        let got = sh(&format!("cat '{}/0'", dir.display()));
        assert_eq!(got, want, "{filter}");
        // The .json form: the envelopes jq keeps from the unfiltered .json stream.
        let want =
            sh(&format!("jq -c '. as $r | .payload | fromjson? | {jq} | $r' {}", json.display()));
        let got = sh(&format!("cat '{}/0.json'", dir.display()));
        assert_eq!(got, want, "{filter}.json");
        // `wc -c` trusts the size; `tail -n 1` seeks to it.
        let size = sh(&format!("stat -c %s '{}/0.json'", dir.display()));
        assert_eq!(size.trim(), got.len().to_string(), "{filter}: stat");
        let last = sh(&format!("tail -n 1 '{}/0.json'", dir.display()));
        assert_eq!(last, format!("{}\n", got.lines().last().unwrap()), "{filter}: tail -n 1");
    }
}

#[test]
fn cat_of_a_filtered_stream_is_what_jq_keeps_on_a_read_write_and_a_read_only_mount() {
    let m = MountGuard::foreground(&["--segment-bytes", "65536"]);
    fs::create_dir(m.path("orders")).unwrap();
    fs::write(m.path("orders/0/append"), orders(4000)).unwrap();
    check_against_jq(&m);
    // A bad filter: EINVAL.
    let out = sh_output(&format!("ls '{}'", m.path("orders/where/user!x").display()));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Invalid argument"), "{out:?}");
    let dirs = m.unmount();
    // The same data dir read-only, as a broker's disk is mounted.
    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    check_against_jq(&m);
    let info = fs::read_to_string(m.path("orders/where/user=user-42/0/info")).unwrap();
    // A scan, or the index the reads above declared (built in the background, or loaded from
    // what the writable mount kept beside the segments): the same records either way.
    assert!(info.contains("filter: user=user-42\nanswered_by: "), "{info}");
    m.unmount();
}

#[test]
fn tail_f_of_a_filtered_stream_shows_exactly_the_new_matches() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("orders")).unwrap();
    fs::write(m.path("orders/0/append"), orders(300)).unwrap();
    // From offset 200 (the last 100 records): user-7's are ids 207 and 257, and 257 is a
    // plain line, so one match.
    let path = m.path("orders/where/user=user-7/0/by-offset/-100");
    let mut tail = Follower::start("tail", &["-f", "-n", "+1", path.to_str().unwrap()]);
    let first = tail.wait_for("\"id\":207,");
    assert_eq!(first.lines().count(), 1, "{first}");
    // Non-matching records, then a match: the follower shows the match and nothing else.
    let mut more = String::new();
    for i in 0..20 {
        more.push_str(&format!("{{\"user\":\"user-8\",\"n\":{i}}}\n"));
    }
    more.push_str("{\"user\":\"user-7\",\"n\":\"new\"}\n");
    fs::write(m.path("orders/0/append"), &more).unwrap();
    let seen = tail.wait_for("\"n\":\"new\"");
    assert_eq!(seen.lines().count(), 2, "{seen}");
    assert!(!seen.contains("user-8"), "{seen}");
    drop(tail);
    m.unmount();
}

/// `<topic>/indexes` through a real mount: `echo user > indexes` declares the index, `cat
/// indexes` shows it building then `ready` (polled: the builds run in the background), the
/// filtered `.json` stream is then what `jq` keeps and `info` says the index answered it;
/// `echo -user > indexes` drops it.
#[test]
fn echo_a_field_into_indexes_builds_its_index_and_the_filtered_stream_is_still_what_jq_keeps() {
    let m = MountGuard::foreground(&["--segment-bytes", "65536"]);
    fs::create_dir(m.path("orders")).unwrap();
    fs::write(m.path("orders/0/append"), orders(4000)).unwrap();
    let indexes = m.path("orders/indexes");
    sh(&format!("echo user > '{}'", indexes.display()));
    // Wait on the state the file shows (each read also starts builds of newly sealed segments).
    let mut listed = String::new();
    for _ in 0..600 {
        listed = fs::read_to_string(&indexes).unwrap();
        if listed.starts_with("user ready ") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(listed.starts_with("user ready "), "{listed}");
    let json = m.path("orders/0/by-offset/0.json");
    let want = sh(&format!(
        "jq -c '. as $r | .payload | fromjson? | select(.user==\"user-42\") | $r' {}",
        json.display()
    ));
    assert!(!want.is_empty());
    let got =
        sh(&format!("cat '{}'", m.path("orders/where/user=user-42/0/by-offset/0.json").display()));
    assert_eq!(got, want);
    let info = fs::read_to_string(m.path("orders/where/user=user-42/0/info")).unwrap();
    assert!(info.contains("answered_by: index (user, "), "{info}");
    sh(&format!("printf '%s\\n' -user > '{}'", indexes.display()));
    let listed = fs::read_to_string(&indexes).unwrap();
    assert!(!listed.contains("user "), "{listed}");
    let info = fs::read_to_string(m.path("orders/where/user=user-42/0/info")).unwrap();
    assert!(info.contains("answered_by: scan"), "{info}");
    m.unmount();
}

#[test]
fn a_read_only_mount_declares_indexes_with_o_index_and_its_kernel_refuses_writes_to_indexes() {
    let m = MountGuard::foreground(&["--segment-bytes", "65536"]);
    fs::create_dir(m.path("orders")).unwrap();
    fs::write(m.path("orders/0/append"), orders(4000)).unwrap();
    let dirs = m.unmount();
    // Read-only, as a broker's disk is mounted: the index is declared by the mount option.
    let m = MountGuard::foreground_on(dirs, &["--read-only", "-o", "index=orders/user"]);
    let indexes = m.path("orders/indexes");
    let mut listed = String::new();
    for _ in 0..600 {
        listed = fs::read_to_string(&indexes).unwrap();
        if listed.starts_with("user ready ") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(listed.starts_with("user ready "), "{listed}");
    let json = m.path("orders/0/by-offset/0.json");
    let want = sh(&format!(
        "jq -c '. as $r | .payload | fromjson? | select(.user==\"user-42\") | $r' {}",
        json.display()
    ));
    let got =
        sh(&format!("cat '{}'", m.path("orders/where/user=user-42/0/by-offset/0.json").display()));
    assert!(!want.is_empty());
    assert_eq!(got, want);
    let info = fs::read_to_string(m.path("orders/where/user=user-42/0/info")).unwrap();
    assert!(info.contains("answered_by: index (user, "), "{info}");
    // The kernel keeps a read-only mount's files from being written: `indexes` too.
    let out = sh_output(&format!("echo -user > '{}'", indexes.display()));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Read-only file system"), "{out:?}");
    m.unmount();
}
