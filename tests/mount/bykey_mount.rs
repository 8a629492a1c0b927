//! `by-key/`, `latest/`, `keys` and the topic's `by-key/` through a real mount, driven with
//! cat, jq, tail -f, test -e and ls.

use crate::common;

use std::fs;

use common::{Follower, MountGuard, sh, sh_output, wait_until};

/// A mount with topic `t` (one partition) whose records have keys of every kind.
fn mounted() -> MountGuard {
    let m = MountGuard::foreground(&[]);
    sh(&format!("mkdir {}", m.path("t").display()));
    let lines = [
        r#"{"key":"user-1","payload":"v1"}"#,
        r#"{"key":"user-2","payload":"w1"}"#,
        r#"{"key":"a/b","payload":"slash"}"#,
        // Bytes ff 00 62: not UTF-8.
        r#"{"key":"/wBi","key_encoding":"base64","payload":"binary"}"#,
        r#"{"key":"","payload":"empty"}"#,
        r#"{"key":null,"payload":"nokey"}"#,
        r#"{"key":"x.json","payload":"dotted"}"#,
        r#"{"key":"user-1","payload":"v2"}"#,
        r#"{"key":"user-2","payload":null}"#,
    ];
    let long = format!(r#"{{"key":"{}","payload":"long"}}"#, "L".repeat(300));
    let lines: Vec<&str> = lines.iter().copied().chain([long.as_str()]).collect();
    let path = m.path("t/0/append.json");
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    m
}

fn cat(m: &MountGuard, rel: &str) -> String {
    sh(&format!("cat '{}'", m.path(rel).display()))
}

#[test]
fn by_key_and_latest_show_one_keys_records_with_cat_and_jq() {
    let m = mounted();
    assert_eq!(cat(&m, "t/0/by-key/user-1"), "v1\nv2\n");
    assert_eq!(
        sh(&format!(
            "jq -c '[.offset,.key,.payload]' {}",
            m.path("t/0/by-key/user-1.json").display()
        )),
        "[0,\"user-1\",\"v1\"]\n[7,\"user-1\",\"v2\"]\n"
    );
    assert_eq!(cat(&m, "t/0/latest/user-1"), "v2\n");
    assert_eq!(sh(&format!("jq -r .offset {}", m.path("t/0/latest/user-1.json").display())), "7\n");
    // The last record of user-2 is a tombstone: no latest value.
    assert_eq!(cat(&m, "t/0/by-key/user-2.json").lines().count(), 2);
    let absent = sh_output(&format!("test -e {}", m.path("t/0/latest/user-2").display()));
    assert!(!absent.status.success());
    assert!(!sh_output(&format!("cat {}", m.path("t/0/latest/nobody").display())).status.success());
    // An absent key is an empty stream (it may come), not an error.
    assert_eq!(cat(&m, "t/0/by-key/nobody"), "");
    // `.raw` is the stored batch holding the record.
    let raw = fs::read(m.path("t/0/by-key/a%2Fb.raw")).unwrap_or_default();
    assert!(raw.is_empty(), "a/b's name is %a%2Fb, not a%2Fb");
    let raw = fs::read(m.path("t/0/by-key/%a%2Fb.raw")).unwrap();
    assert!(raw.windows(5).any(|w| w == b"slash"));
    // stat's size is what cat reads.
    let size = fs::metadata(m.path("t/0/by-key/user-1.json")).unwrap().len();
    assert_eq!(size as usize, cat(&m, "t/0/by-key/user-1.json").len());
    // Topic level: the partition murmur2 places the key in (the only one here).
    assert_eq!(
        sh(&format!("jq -r .payload {}", m.path("t/by-key/user-1.json").display())),
        "v1\nv2\n"
    );
    assert_eq!(
        sh(&format!("ls {}", m.path("t/0").display())),
        "append\nappend.json\nby-key\nby-offset\nby-time\ncheck\ninfo\nkeys\nlatest\nsegments\n"
    );
}

/// Every key's name in `keys` opens its records, and the JSON key of those records is the key.
#[test]
fn hidden_key_names_round_trip_through_keys() {
    let m = mounted();
    let keys = cat(&m, "t/0/keys");
    // In key order: the null key, the empty key, then by bytes ("L"*300 < "a/b" < "user-1" <
    // "x.json" < ff 00 62); stat's size is exactly what cat read.
    let order: Vec<&str> = keys.lines().map(|l| l.split_once('\t').unwrap().0).collect();
    assert_eq!(order.len(), 8, "{keys}");
    assert_eq!(&order[..2], ["%null", "%"]);
    assert!(order[2].starts_with("%~"), "{keys}");
    assert_eq!(&order[3..], ["%a%2Fb", "user-1", "user-2", "%x%2Ejson", "%%FF%00b"]);
    let stat = sh(&format!("stat -c %s '{}'", m.path("t/0/keys").display()));
    assert_eq!(stat.trim(), keys.len().to_string());
    let mut names: Vec<(String, String)> = keys
        .lines()
        .map(|l| {
            let (name, count) = l.split_once('\t').unwrap();
            (name.to_string(), count.to_string())
        })
        .collect();
    names.sort();
    // The 300-byte key is named by its hashes, and that name opens it.
    let at = names.iter().position(|(n, _)| n.starts_with("%~")).unwrap();
    let (long, count) = names.remove(at);
    assert!(long.starts_with("%~") && long.len() == 34 && count == "1", "{long}");
    let path = m.path(&format!("t/0/by-key/{long}.json"));
    assert_eq!(sh(&format!("jq -r .key '{}'", path.display())), format!("{}\n", "L".repeat(300)));
    assert_eq!(sh(&format!("cat '{}'", m.path(&format!("t/0/latest/{long}")).display())), "long\n");
    assert_eq!(
        names,
        [
            ("%".into(), "1".into()),
            ("%%FF%00b".into(), "1".into()),
            ("%a%2Fb".into(), "1".into()),
            ("%null".into(), "1".into()),
            ("%x%2Ejson".into(), "1".into()),
            ("user-1".into(), "2".into()),
            ("user-2".into(), "2".into()),
        ]
    );
    let expect = [
        ("%", r#"[4,"",null]"#),
        ("%%FF%00b", r#"[3,"/wBi","base64"]"#),
        ("%a%2Fb", r#"[2,"a/b",null]"#),
        ("%null", r#"[5,null,null]"#),
        ("%x%2Ejson", r#"[6,"x.json",null]"#),
    ];
    for (name, json) in expect {
        let path = m.path(&format!("t/0/by-key/{name}.json"));
        let got = sh(&format!("jq -c '[.offset,.key,.key_encoding]' '{}'", path.display()));
        assert_eq!(got.trim(), json, "{name}");
    }
    assert_eq!(sh(&format!("cat '{}'", m.path("t/0/latest/%null").display())), "nokey\n");
}

#[test]
fn tail_f_of_a_key_follows_its_new_records_only() {
    let m = mounted();
    let stream = m.path("t/0/by-key/user-1");
    let mut follower = Follower::start("tail", &["-f", "-s", "0.2", stream.to_str().unwrap()]);
    follower.wait_for("v2\n");
    let append = m.path("t/0/append.json");
    fs::write(
        &append,
        "{\"key\":\"user-2\",\"payload\":\"other\"}\n{\"key\":\"user-1\",\"payload\":\"v3\"}\n",
    )
    .unwrap();
    let seen = follower.wait_for("v3\n");
    assert!(!seen.contains("other"), "{seen}");
    fs::write(&append, "{\"key\":\"user-1\",\"payload\":\"v4\"}\n").unwrap();
    let seen = follower.wait_for("v4\n");
    assert_eq!(seen, "v1\nv2\nv3\nv4\n");
}

/// `(offset, key)` of each JSON line of `text`.
fn offsets_and_keys(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["offset"].as_u64().unwrap(), v["key"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// `path` read whole by a new open, with its `fstat` size; read again while a pass ending
/// between the open and the read makes it stale (a stream opened before a pass).
fn read_sized(path: &std::path::Path) -> (u64, String) {
    let mut read = None;
    wait_until("a whole read", || {
        let once = fs::File::open(path).and_then(|mut f| {
            let size = f.metadata()?.len();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut f, &mut text)?;
            Ok((size, text))
        });
        read = once.map_err(|e| assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{e}")).ok();
        read.is_some()
    });
    read.unwrap_or_default()
}

fn read_whole(path: &std::path::Path) -> String {
    read_sized(path).1
}

/// Issue 44, item 3: a `by-key/` file read (or held open) before cleaner passes shows, at every
/// later open, exactly the log the passes left, with `stat` agreeing: the records of `a` the
/// pass removed and a tombstone (with the value it deleted) past `delete.retention.ms` are
/// gone; so at topic level. A handle opened before keeps what it showed (`by-key/`), or is
/// stale as a whole where a pass replaced what it renders (the topic's merged `by-time/`).
#[test]
fn a_key_file_opened_after_cleaner_passes_shows_exactly_the_log_they_left() {
    let m = MountGuard::foreground(&["--cache-dir", "none", "--cleaner-backoff-ms", "100"]);
    fs::create_dir(m.path("kv")).unwrap();
    let config = |line: &str| {
        sh(&format!("printf '{line}\\n' >> '{}'", m.path("kv/config").display()));
    };
    // Everything stays in the active segment (never cleaned) until the files are read.
    config("cleanup.policy=compact");
    config("delete.retention.ms=0");
    let append = m.path("kv/0/append.json");
    for i in 1..=8 {
        sh(&format!(
            "printf '{{\"key\":\"a\",\"payload\":\"a{i}\"}}\\n' >> '{}'",
            append.display()
        ));
    }
    sh(&format!(
        "printf '{{\"key\":\"t\",\"payload\":\"t1\"}}\\n{{\"key\":\"t\",\"payload\":null}}\\n' >> '{}'",
        append.display()
    ));
    let by_key = m.path("kv/0/by-key/a.json");
    let cat = |p: &std::path::Path| sh(&format!("cat '{}'", p.display()));
    let first = cat(&by_key);
    assert_eq!(offsets_and_keys(&first).len(), 8);
    assert_eq!(offsets_and_keys(&cat(&m.path("kv/0/by-key/t.json"))).len(), 2);
    // Handles kept open across the passes (a reader such as `tail -f`).
    let mut held_key = fs::File::open(&by_key).unwrap();
    let topic_stream = m.path("kv/by-time/0.json");
    let mut held_topic = fs::File::open(&topic_stream).unwrap();
    // Keyless filler rolls small segments: the records above become cleanable. A new open of
    // by-offset/0.json reads the log as it is: the first pass removes a1..a7 and t1 (and
    // gives the tombstone its horizon), the one after more filler the tombstone.
    config("segment.bytes=300");
    let filler = |from: usize| {
        for i in from..from + 8 {
            sh(&format!("printf 'filler{i}\\n' >> '{}'", m.path("kv/0/append").display()));
        }
    };
    filler(0);
    let log_now = || offsets_and_keys(&read_whole(&m.path("kv/0/by-offset/0.json")));
    wait_until("a pass removed a1", || log_now().first().is_some_and(|(o, _)| *o > 0));
    filler(8);
    wait_until("a pass removed the tombstone", || !log_now().iter().any(|(_, k)| k == "t"));
    let log = log_now();
    let of_a: Vec<(u64, String)> = log.iter().filter(|(_, k)| k == "a").cloned().collect();
    assert_eq!(of_a, [(7, "a".to_string())], "{log:?}");
    let now = cat(&by_key);
    assert_eq!(offsets_and_keys(&now), of_a, "by-key/a.json after the passes");
    assert_eq!(fs::metadata(&by_key).unwrap().len(), now.len() as u64, "stat agrees");
    assert_eq!(cat(&m.path("kv/0/by-key/t.json")), "");
    assert_eq!(fs::metadata(m.path("kv/0/by-key/t.json")).unwrap().len(), 0);
    let latest_t = sh_output(&format!("test -e '{}'", m.path("kv/0/latest/t").display()));
    assert!(!latest_t.status.success());
    let topic_now = cat(&m.path("kv/by-key/a.json"));
    assert_eq!(offsets_and_keys(&topic_now), of_a, "the topic's by-key/a.json");
    // Later passes remove keyless filler: the keyed records are what stays.
    let keyed = |text: &str| -> Vec<(u64, String)> {
        offsets_and_keys(text).into_iter().filter(|(_, k)| !k.is_empty()).collect()
    };
    let (size, text) = read_sized(&topic_stream);
    assert_eq!(keyed(&text), of_a, "the topic's by-time/0.json");
    assert_eq!(size, text.len() as u64, "fstat of the topic's by-time/0.json");
    // The handles opened before: by-key/ shows what it showed (kept in memory), the merged
    // stream is stale.
    let mut old = String::new();
    std::io::Read::read_to_string(&mut held_key, &mut old).unwrap();
    assert_eq!(old, first);
    let mut buf = Vec::new();
    let err = std::io::Read::read_to_end(&mut held_topic, &mut buf).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}");
}
