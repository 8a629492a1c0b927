//! Tests of the command line: definitions, option parsing, mount-helper command lines.

use clap::CommandFactory;

use super::*;
use crate::mount::{Access, Mode, MountRequest};

#[test]
fn cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn a_kafka_source_takes_client_settings_and_a_local_one_keeps_log_settings() {
    let mount = |extra: &[&str], source: &str| {
        let mut argv = vec!["topicfs", "mount", source, "m"];
        argv.extend_from_slice(extra);
        let Command::Mount(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not mount")
        };
        args.request()
    };
    let r = mount(
        &["--config", "request.timeout.ms=1234", "--config", "client.id=me"],
        "kafka://h1:9092,h2:9093",
    )
    .unwrap();
    let cluster = r.cluster.unwrap();
    assert_eq!(cluster.bootstrap.len(), 2);
    assert_eq!(cluster.config.request_timeout, std::time::Duration::from_millis(1234));
    assert_eq!(cluster.config.client_id, "me");
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("client.properties");
    std::fs::write(&props, "# a comment\nclient.id=fromfile\nrequest.timeout.ms=5000\n").unwrap();
    let props = props.to_str().unwrap();
    let r = mount(&["--command-config", props, "--config", "request.timeout.ms=7"], "kafka://h:1")
        .unwrap();
    let cluster = r.cluster.unwrap();
    assert_eq!(cluster.config.client_id, "fromfile");
    assert_eq!(cluster.config.request_timeout, std::time::Duration::from_millis(7));
    let err = mount(&["--config", "segment.bytes=1024"], "kafka://h:1").unwrap_err();
    assert!(err.to_string().contains("segment.bytes"), "{err}");
    let err = mount(&["--segment-bytes", "1024"], "kafka://h:1").unwrap_err();
    assert!(err.to_string().contains("--segment-bytes"), "{err}");
    let local = mount(&["--config", "segment.bytes=1024"], "d").unwrap();
    assert!(local.cluster.is_none());
    assert_eq!(local.log_config.segment_bytes, 1024);
    assert!(mount(&["--command-config", "f"], "d").is_err());
    assert!(mount(&["--config", "request.timeout.ms=1"], "d").is_err());
    let compact = mount(&["--config", "cleanup.policy=compact"], "d").unwrap();
    assert!(compact.log_config.cleanup_policy.compact && !compact.log_config.cleanup_policy.delete);
}

#[test]
fn kafka_names_and_flags_both_set_log_config() {
    let cli = Cli::try_parse_from([
        "topicfs",
        "mount",
        "d",
        "m",
        "--segment-bytes",
        "1024",
        "--config",
        "retention.ms=-1",
        "--retention-bytes",
        "-1",
        "-o",
        "allow_other,noatime",
        "-o",
        "ro",
    ])
    .unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    let request = args.request().unwrap();
    assert_eq!(request.log_config.segment_bytes, 1024);
    assert_eq!(request.log_config.retention_ms, None);
    // The names given are the mount's defaults, even at Kafka's own value (retention.bytes).
    let given: Vec<(&str, &str)> =
        request.log_settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        given,
        [("retention.bytes", "-1"), ("retention.ms", "-1"), ("segment.bytes", "1024")]
    );
    assert!(request.read_only, "-o ro means read-only");
    assert_eq!(request.fuse_options.len(), 3);
    assert_eq!(args.mode(), Mode::Background);
}

fn os(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

fn helper(words: &[&str]) -> std::result::Result<Option<HelperArgs>, String> {
    helper_args(&os(words)).map_err(|e| e.to_string())
}

#[test]
fn a_mount_helper_command_line_becomes_topicfs_mount() {
    // mount(8) running /sbin/mount.topicfs for an fstab line of type topicfs.
    let h = helper(&[
        "/sbin/mount.topicfs",
        "/var/lib/kafka",
        "/mnt/kafka",
        "-o",
        "rw,_netdev,nofail,x-systemd.automount,allow_other,partitions=3,segment.bytes=1048576,\
         retention_check_interval_ms=1000",
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        h.args,
        os(&[
            "mount",
            "/var/lib/kafka",
            "/mnt/kafka",
            "--partitions",
            "3",
            "--config",
            "segment.bytes=1048576",
            "--retention-check-interval-ms",
            "1000",
            "-o",
            "rw,allow_other",
        ])
    );
    assert!(!h.fake);
    // What clap makes of it.
    let cli =
        Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(h.args)).unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    let request = args.request().unwrap();
    assert_eq!((request.partitions, request.log_config.segment_bytes), (3, 1_048_576));
    assert!(!request.read_only);
    assert_eq!(args.mode(), Mode::Background, "a helper returns once mounted");
}

#[test]
fn mount_fuse3_s_command_line_and_read_only_forms() {
    // mount.fuse3 for type fuse.topicfs runs `topicfs SOURCE MOUNTPOINT -o OPTIONS`.
    let h = helper(&["topicfs", "data", "mnt", "-o", "ro,isolation=read_uncommitted"])
        .unwrap()
        .unwrap();
    assert_eq!(
        h.args,
        os(&["mount", "data", "mnt", "--isolation", "read_uncommitted", "-o", "ro"])
    );
    let h = helper(&["mount.topicfs", "data", "mnt", "-oread_only,threads=4", "-n", "-v"])
        .unwrap()
        .unwrap();
    assert_eq!(h.args, os(&["mount", "data", "mnt", "--threads", "4", "--read-only"]));
    let cli =
        Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(h.args)).unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    assert!(args.request().unwrap().read_only);
    // -f: check only.
    assert!(helper(&["mount.topicfs", "-f", "d", "m"]).unwrap().unwrap().fake);
}

#[test]
fn sizing_budget_is_a_flag_and_an_option_with_byte_suffixes() {
    let h = helper(&["topicfs", "data", "mnt", "-o", "ro,sizing_budget=64K"]).unwrap().unwrap();
    assert_eq!(h.args, os(&["mount", "data", "mnt", "--sizing-budget", "64K", "-o", "ro"]));
    let cli =
        Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(h.args)).unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    assert_eq!(args.request().unwrap().sizing_budget, Some(64 << 10));
    let cli = Cli::try_parse_from(["topicfs", "mount", "d", "m"]).unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    assert_eq!(args.request().unwrap().sizing_budget, None);
    assert_eq!(parse_bytes("1g").ok(), Some(1 << 30));
    assert_eq!(parse_bytes("4096").ok(), Some(4096));
    assert!(parse_bytes("16X").is_err());
    assert!(parse_bytes("").is_err());
    assert!(parse_bytes("99999999999G").is_err());
}

#[test]
fn ordinary_command_lines_are_not_helper_calls() {
    for words in [
        &["topicfs", "mount", "d", "m"][..],
        &["topicfs", "unmount", "m"],
        &["topicfs", "--help"],
        &["topicfs", "help", "mount"],
        &["topicfs"],
    ] {
        assert_eq!(helper(words).unwrap(), None, "{words:?}");
    }
}

#[test]
fn helper_refuses_unknown_options_unless_sloppy() {
    let err = helper(&["mount.topicfs", "d", "m", "-o", "rw,bogus"]).unwrap_err();
    assert!(err.contains("\"bogus\""), "{err}");
    let h = helper(&["mount.topicfs", "-s", "d", "m", "-o", "rw,bogus"]).unwrap().unwrap();
    assert_eq!(h.args, os(&["mount", "d", "m", "-o", "rw"]));
    assert!(helper(&["mount.topicfs", "d"]).unwrap_err().contains("SOURCE MOUNTPOINT"));
    assert!(helper(&["mount.topicfs", "d", "m", "-x"]).unwrap_err().contains("-x"));
    assert!(helper(&["mount.topicfs", "d", "m", "-o"]).unwrap_err().contains("-o"));
}

#[test]
fn group_options_parse_from_the_command_line_and_fstab() {
    use crate::view::groups::ResetPolicy;
    let cli = Cli::try_parse_from([
        "topicfs",
        "mount",
        "d",
        "m",
        "-o",
        "show_internal,auto_offset_reset=latest,auto_commit",
    ])
    .unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    assert_eq!(
        args.request().unwrap().fuse_options,
        [
            FuseOption::ShowInternal,
            FuseOption::AutoOffsetReset(ResetPolicy::Latest),
            FuseOption::AutoCommit
        ]
    );
    let err = Cli::try_parse_from(["topicfs", "mount", "d", "m", "-o", "auto_offset_reset=x"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("earliest or latest"), "{err}");
    let h = helper(&["mount.topicfs", "d", "m", "-o", "ro,show_internal,auto_offset_reset=latest"])
        .unwrap()
        .unwrap();
    assert_eq!(h.args, os(&["mount", "d", "m", "-o", "ro,show_internal,auto_offset_reset=latest"]));
}

#[test]
fn cache_dir_and_size_are_flags_and_options_and_none_turns_the_cache_off() {
    let parse = |words: &[&str]| {
        let cli = Cli::try_parse_from(["topicfs", "mount", "d", "m"].iter().chain(words)).unwrap();
        let Command::Mount(args) = cli.command else { panic!("not mount") };
        args.request().unwrap().cache
    };
    let defaults = parse(&[]);
    assert_eq!(defaults.dir, Some(PathBuf::from("/var/cache/topicfs")));
    assert_eq!(defaults.max_bytes, 256 << 20);
    let flags = parse(&["--cache-dir", "/tmp/c", "--cache-size", "1G"]);
    assert_eq!((flags.dir, flags.max_bytes), (Some(PathBuf::from("/tmp/c")), 1 << 30));
    let o = parse(&["-o", "ro,cache_dir=/tmp/o,cache_size=64M"]);
    assert_eq!((o.dir, o.max_bytes), (Some(PathBuf::from("/tmp/o")), 64 << 20));
    assert_eq!(parse(&["-o", "cache_dir=none"]).dir, None);
    assert_eq!(parse(&["--cache-dir", "none"]).dir, None);
    assert_eq!(parse(&["--cache-dir", "/a", "-o", "cache_dir=/b"]).dir, Some("/b".into()));
    assert!(Cli::try_parse_from(["topicfs", "mount", "d", "m", "-o", "cache_dir="]).is_err());
    assert!(Cli::try_parse_from(["topicfs", "mount", "d", "m", "--cache-size", "x"]).is_err());
    let h = helper(&["mount.topicfs", "d", "m", "-o", "ro,cache_dir=/c,cache_size=1M"])
        .unwrap()
        .unwrap();
    assert_eq!(h.args, os(&["mount", "d", "m", "-o", "ro,cache_dir=/c,cache_size=1M"]));
}

#[test]
fn bad_settings_are_refused_with_their_key() {
    let cli =
        Cli::try_parse_from(["topicfs", "mount", "d", "m", "--config", "segment.bytes"]).unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    assert!(args.request().unwrap_err().to_string().contains("KEY=VALUE"));
    assert!(Cli::try_parse_from(["topicfs", "mount", "d", "m", "-o", "bogus"]).is_err());
    assert!(Cli::try_parse_from(["topicfs", "mount", "d", "m", "--partitions", "0"]).is_err());
}

#[test]
fn access_flags_and_options_agree_and_flags_win() {
    let parse = |words: &[&str]| {
        let cli = Cli::try_parse_from(["topicfs", "mount", "d", "m"].iter().chain(words)).unwrap();
        let Command::Mount(args) = cli.command else { panic!("not mount") };
        args.request().unwrap().access
    };
    let by_options = parse(&["-o", "uid=0,gid=root,file_mode=0640,dir_mode=0750"]);
    let by_flags =
        parse(&["--uid", "root", "--gid", "0", "--file-mode", "640", "--dir-mode", "0750"]);
    assert_eq!(by_options, by_flags);
    assert_eq!(
        by_options,
        Access { uid: Some(0), gid: Some(0), file_mode: 0o640, dir_mode: 0o750 }
    );
    let a = parse(&["-o", "umask=077", "--umask", "022"]);
    assert_eq!((a.file_mode, a.dir_mode), (0o644, 0o755), "the flag wins");
    let a = parse(&["-o", "uid=5", "--uid", "6"]);
    assert_eq!(a.uid, Some(6));
    assert!(Cli::try_parse_from(["topicfs", "mount", "d", "m", "--file-mode", "999"]).is_err());
    // fstab / mount.fuse3 options reach the same place.
    let h = helper(&["mount.topicfs", "d", "m", "-o", "allow_other,uid=0,umask=027,_netdev"])
        .unwrap()
        .unwrap();
    assert_eq!(h.args, os(&["mount", "d", "m", "-o", "allow_other,uid=0,umask=027"]));
}

#[test]
fn memory_budget_and_background_threads_come_from_flags_or_o_options() {
    let request = |words: &[&str]| -> Result<MountRequest, String> {
        let argv = ["topicfs", "mount", "d", "m"].iter().chain(words);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let Command::Mount(args) = cli.command else { panic!("not mount") };
        args.request().map_err(|e| e.to_string())
    };
    let defaults = request(&[]).unwrap();
    assert_eq!(defaults.memory_budget, 64 << 20);
    assert_eq!(defaults.background_threads, crate::executor::Executor::default_threads());
    let flags = request(&["--memory-budget", "256M", "--background-threads", "4"]).unwrap();
    assert_eq!((flags.memory_budget, flags.background_threads), (256 << 20, 4));
    let o = request(&["-o", "ro,memory_budget=1G,background_threads=8"]).unwrap();
    assert_eq!((o.memory_budget, o.background_threads), (1 << 30, 8));
    // The former names still work; the newer flag wins over the former one.
    assert_eq!(request(&["--render-threads", "3"]).unwrap().background_threads, 3);
    assert_eq!(request(&["-o", "render_threads=5"]).unwrap().background_threads, 5);
    let named = request(&["--render-threads", "3", "--background-threads", "6"]).unwrap();
    assert_eq!(named.background_threads, 6);
    assert!(o.read_only);
    // -o wins over the flag.
    let both = request(&["--memory-budget", "1M", "-o", "memory_budget=2M"]).unwrap();
    assert_eq!(both.memory_budget, 2 << 20);
    assert_eq!(request(&["--memory-budget", "65536"]).unwrap().memory_budget, 65536);
    assert_eq!(request(&["--memory-budget", "512KiB"]).unwrap().memory_budget, 512 << 10);
    for bad in [
        &["--memory-budget", "lots"][..],
        &["--memory-budget", "-1"],
        &["--render-threads", "0"],
        &["--background-threads", "0"],
        &["--background-threads", "65"],
        &["-o", "background_threads=x"],
        &["-o", "render_threads=x"],
        &["-o", "memory_budget=12Q"],
    ] {
        assert!(request(bad).is_err(), "{bad:?} accepted");
    }
    // fstab: both stay -o options.
    let h =
        helper(&["mount.topicfs", "d", "m", "-o", "ro,memory_budget=128M,background_threads=2"])
            .unwrap()
            .unwrap();
    assert_eq!(
        h.args,
        os(&["mount", "d", "m", "-o", "ro,memory_budget=128M,background_threads=2"])
    );
}

#[test]
fn mount_help_lists_every_cluster_client_setting() {
    let mut cmd = Cli::command();
    let mount = cmd.find_subcommand_mut("mount").unwrap();
    let help = mount.render_long_help().to_string();
    for key in crate::cluster::config::KNOWN_KEYS {
        assert!(help.contains(key), "`topicfs mount --help` does not list {key}");
    }
}

#[test]
fn server_properties_flag_reads_the_file_into_topic_settings_at_mount() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "node.id=1\nlog.retention.hours=1\nlog.cleanup.policy=compact\n")
        .unwrap();
    let file = file.to_str().unwrap();
    let request = |source: &str, extra: &[&str]| {
        let mut argv = vec!["topicfs", "mount", source, "m"];
        argv.extend_from_slice(extra);
        let Command::Mount(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not mount")
        };
        args.request()
    };
    let r = request("data", &["--server-properties", file]).unwrap();
    let want: std::collections::BTreeMap<String, String> =
        [("cleanup.policy", "compact"), ("retention.ms", "3600000")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    assert_eq!(r.server_properties, want);
    assert!(request("data", &[]).unwrap().server_properties.is_empty());
    let missing = request("data", &["--server-properties", "/no/such/server.properties"])
        .unwrap_err()
        .to_string();
    assert!(missing.contains("/no/such/server.properties"), "{missing}");
    let cluster = request("kafka://h:1", &["--server-properties", file]).unwrap_err();
    assert!(cluster.to_string().contains("only for a local mount"), "{cluster}");
    // fstab: server_properties=FILE becomes the flag.
    let args = helper(&["mount.topicfs", "data", "m", "-o", &format!("server_properties={file}")])
        .unwrap()
        .unwrap()
        .args;
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    assert!(args.windows(2).any(|w| w == ["--server-properties", file]), "{args:?}");
}

#[test]
fn every_path_option_is_made_absolute_against_the_current_directory() {
    use std::path::Path;
    let cwd = std::env::current_dir().unwrap();
    let request = |argv: &[&str]| {
        let Command::Mount(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not mount")
        };
        args.request().unwrap()
    };
    let r = request(&["topicfs", "mount", "d", "m", "--cache-dir", "c"]);
    assert_eq!(r.data_dir, cwd.join("d"));
    assert_eq!(r.mountpoint, cwd.join("m"));
    assert_eq!(r.cache.dir, Some(cwd.join("c")));
    let r = request(&["topicfs", "mount", "d", "m", "-o", "cache_dir=sub/c"]);
    assert_eq!(r.cache.dir, Some(cwd.join("sub/c")));
    let r = request(&["topicfs", "mount", "/abs/d", "/abs/m", "--cache-dir", "none"]);
    assert_eq!(
        (r.data_dir.as_path(), r.mountpoint.as_path()),
        (Path::new("/abs/d"), Path::new("/abs/m"))
    );
    assert_eq!(r.cache.dir, None);
    let r = request(&[
        "topicfs",
        "mount",
        "kafka://h:1",
        "m",
        "--config",
        "ssl.ca.location=ca.pem",
        "--config",
        "ssl.certificate.location=client.pem",
        "--config",
        "ssl.key.location=client.key",
    ]);
    assert_eq!(r.data_dir, Path::new("kafka://h:1"), "a bootstrap spec is not a path");
    let config = r.cluster.unwrap().config;
    assert_eq!(config.ssl_ca_location, Some(cwd.join("ca.pem")));
    assert_eq!(config.ssl_certificate_location, Some(cwd.join("client.pem")));
    assert_eq!(config.ssl_key_location, Some(cwd.join("client.key")));
}

#[test]
fn max_partitions_and_allow_non_log_dir_are_flags_and_fstab_options() {
    let request = |words: &[&str]| {
        let mut argv = vec!["topicfs", "mount", "d", "m"];
        argv.extend_from_slice(words);
        let Command::Mount(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not mount")
        };
        args.request()
    };
    let defaults = request(&[]).unwrap();
    assert_eq!((defaults.max_partitions, defaults.allow_non_log_dir), (10_000, false));
    assert!(request(&["--allow-non-log-dir"]).unwrap().allow_non_log_dir);
    assert!(request(&["-o", "ro,allow_non_log_dir"]).unwrap().allow_non_log_dir);
    assert_eq!(request(&["--max-partitions", "20000"]).unwrap().max_partitions, 20_000);
    // --partitions above the maximum: a usage error, before anything happens.
    let err = request(&["--partitions", "4294967295"]).unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err:?}");
    assert!(err.to_string().contains("--max-partitions 10000"), "{err}");
    assert!(request(&["--partitions", "20000", "--max-partitions", "20000"]).is_ok());
    // Kafka's INT32 limit bounds the maximum itself.
    for bad in ["0", "2147483648", "4294967295"] {
        let argv = ["topicfs", "mount", "d", "m", "--max-partitions", bad];
        assert!(Cli::try_parse_from(argv).is_err(), "{bad}");
    }
    // fstab: max_partitions=N becomes the flag; allow_non_log_dir stays an -o option.
    let h = helper(&["mount.topicfs", "d", "m", "-o", "ro,max_partitions=5,allow_non_log_dir"])
        .unwrap()
        .unwrap();
    assert_eq!(
        h.args,
        os(&["mount", "d", "m", "--max-partitions", "5", "-o", "ro,allow_non_log_dir"])
    );
}

#[test]
fn cleaner_settings_reach_the_mount_request_with_kafkas_defaults() {
    let mount = |extra: &[&str]| {
        let mut argv = vec!["topicfs", "mount", "/data", "m"];
        argv.extend_from_slice(extra);
        let Command::Mount(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not mount")
        };
        args.request().unwrap()
    };
    let r = mount(&[]);
    assert_eq!(r.cleaner_backoff, std::time::Duration::from_millis(15_000));
    assert_eq!(r.cleaner_dedupe_buffer_bytes, 128 << 20);
    let r = mount(&["--cleaner-backoff-ms", "500", "--cleaner-dedupe-buffer-size", "3M"]);
    assert_eq!(r.cleaner_backoff, std::time::Duration::from_millis(500));
    assert_eq!(r.cleaner_dedupe_buffer_bytes, 3 << 20);
    assert!(
        Cli::try_parse_from(["topicfs", "mount", "/d", "m", "--cleaner-backoff-ms", "0"]).is_err()
    );
}

#[test]
fn fstab_options_name_the_schema_registry_and_its_client_settings() {
    let h = helper(&[
        "/sbin/mount.topicfs",
        "/var/lib/kafka",
        "/mnt/kafka",
        "-o",
        "ro,schema.registry.url=https://registry:8081,basic.auth.user.info=svc:secret,\
         schema.registry.ssl.ca.location=/etc/ca.pem,schemas_topic=_schemas,segment.bytes=1048576",
    ])
    .unwrap()
    .unwrap();
    let cli =
        Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(h.args)).unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    let request = args.request().unwrap();
    assert_eq!(request.schemas.registry.as_deref(), Some("https://registry:8081"));
    assert_eq!(
        request.schemas.registry_config,
        vec![
            ("basic.auth.user.info".to_string(), "svc:secret".to_string()),
            ("schema.registry.ssl.ca.location".to_string(), "/etc/ca.pem".to_string()),
        ]
    );
    assert_eq!(request.schemas.topic.as_deref(), Some("_schemas"));
    assert_eq!(request.log_settings.get("segment.bytes").map(String::as_str), Some("1048576"));
}

/// The mount request `args` (after the program name) describe, as text, without the `-o`
/// options themselves (a flag and its `-o` form must describe the same mount).
fn described(args: Vec<OsString>) -> String {
    let cli = Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(args))
        .unwrap_or_else(|e| panic!("{e}"));
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    let mut request = args.request().unwrap_or_else(|e| panic!("{e}"));
    request.fuse_options.clear();
    format!("{request:?}")
}

#[test]
fn every_mount_flag_has_an_fstab_form_that_mounts_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("server.properties");
    std::fs::write(&server, "log.retention.hours=1\n").unwrap();
    let client = dir.path().join("client.properties");
    std::fs::write(&client, "client.id=fstab\n").unwrap();
    let (server, client) = (server.to_str().unwrap(), client.to_str().unwrap());
    // A value for each flag that changes the mount (None: a flag without a value). A new
    // flag fails this test until it is listed here, with a value its fstab form must carry.
    let samples: &[(&str, Option<&str>)] = &[
        ("command-config", Some(client)),
        ("read-only", None),
        ("isolation", Some("read_uncommitted")),
        ("uid", Some("1")),
        ("gid", Some("1")),
        ("umask", Some("027")),
        ("file-mode", Some("0600")),
        ("dir-mode", Some("0700")),
        ("partitions", Some("3")),
        ("max-partitions", Some("5")),
        ("nonempty", None),
        ("allow-non-log-dir", None),
        ("threads", Some("4")),
        ("sizing-budget", Some("64K")),
        ("cache-dir", Some("/c")),
        ("schemas-topic", Some("s")),
        ("schema-registry", Some("http://r:1,http://r:2")),
        ("schema-registry-config", Some("basic.auth.user.info=a:b")),
        ("cache-size", Some("1M")),
        ("memory-budget", Some("1M")),
        ("key-index-memory", Some("1M")),
        ("background-threads", Some("3")),
        ("render-threads", Some("3")),
        ("retention-check-interval-ms", Some("1000")),
        ("server-properties", Some(server)),
        ("cleaner-backoff-ms", Some("500")),
        ("log-file", Some("/var/log/t.log")),
        ("cleaner-dedupe-buffer-size", Some("3M")),
        ("config", Some("cleanup.policy=compact,delete")),
        ("segment-bytes", Some("1048576")),
        ("segment-ms", Some("1000")),
        ("segment-index-bytes", Some("4096")),
        ("index-interval-bytes", Some("8192")),
        ("max-message-bytes", Some("2048")),
        ("retention-ms", Some("-1")),
        ("retention-bytes", Some("100")),
        ("message-timestamp-type", Some("LogAppendTime")),
        ("compression-type", Some("zstd")),
    ];
    let command = Cli::command();
    let mount = command.find_subcommand("mount").unwrap();
    let mut checked = 0;
    for arg in mount.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" || arg.is_hide_set() || helper::NOT_FROM_FSTAB.contains(&long) {
            continue;
        }
        let (_, sample) = samples
            .iter()
            .find(|(flag, _)| *flag == long)
            .unwrap_or_else(|| panic!("--{long}: give it an fstab form and a sample value here"));
        let source = if long == "command-config" { "kafka://h:1" } else { "/d" };
        let mut by_flag = os(&["mount", source, "/m", &format!("--{long}")]);
        by_flag.extend(sample.map(OsString::from));
        let name = long.replace('-', "_");
        let option = match sample {
            Some(value) => format!("{name}={}", value.replace(',', "\\,")),
            None => name,
        };
        let h = helper(&["mount.topicfs", source, "/m", "-o", &format!("rw,{option},nofail")])
            .unwrap_or_else(|e| panic!("{option}: {e}"))
            .unwrap();
        let flag_mount = described(by_flag);
        assert_eq!(described(h.args), flag_mount, "--{long} and -o {option}");
        assert_ne!(
            flag_mount,
            described(os(&["mount", source, "/m"])),
            "--{long} {sample:?} changes nothing: the comparison proves nothing"
        );
        checked += 1;
    }
    assert_eq!(checked, samples.len(), "a sample for a flag `topicfs mount` no longer has");
    // -f cannot come from fstab: mount(8) waits for the helper to return.
    let err = helper(&["mount.topicfs", "d", "m", "-o", "foreground"]).unwrap_err();
    assert!(err.contains("\"foreground\""), "{err}");
    let err = helper(&["mount.topicfs", "d", "m", "-o", "partitions"]).unwrap_err();
    assert!(err.contains("needs a value"), "{err}");
    let err = helper(&["mount.topicfs", "d", "m", "-o", "read_only=yes"]).unwrap_err();
    assert!(err.contains("takes no value"), "{err}");
    let err = helper(&["mount.topicfs", "d", "m", "-o", "auto_offset_reset=x"]).unwrap_err();
    assert!(err.contains("earliest or latest") && !err.contains("or a flag"), "{err}");
    let err = helper(&["mount.topicfs", "d", "m", "-o", "bogus"]).unwrap_err();
    assert!(err.contains("or a flag of `topicfs mount` spelled name=value"), "{err}");
}

#[test]
fn a_comma_inside_a_value_is_written_with_a_backslash_in_fstab_and_in_o() {
    assert_eq!(
        crate::mount::split_options("rw,cleanup.policy=compact\\,delete,,a\\b"),
        ["rw", "cleanup.policy=compact,delete", "", "a\\b"]
    );
    for option in ["cleanup.policy=compact\\,delete", "config=cleanup.policy=compact\\,delete"] {
        let h = helper(&["topicfs", "d", "m", "-o", &format!("rw,{option},dev,suid")])
            .unwrap()
            .unwrap();
        let cli =
            Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(h.args)).unwrap();
        let Command::Mount(args) = cli.command else { panic!("not mount") };
        let request = args.request().unwrap();
        assert_eq!(request.log_settings["cleanup.policy"], "compact,delete", "{option}");
        assert!(
            request.log_config.cleanup_policy.compact && request.log_config.cleanup_policy.delete
        );
        assert_eq!(
            request.fuse_options,
            [FuseOption::ReadWrite, FuseOption::Flag("dev"), FuseOption::Flag("suid")]
        );
    }
    // A FUSE option's value keeps its comma on the way from fstab to -o and in -o itself.
    let h = helper(&["mount.topicfs", "d", "m", "-o", "fsname=a\\,b,ro"]).unwrap().unwrap();
    assert_eq!(h.args, os(&["mount", "d", "m", "-o", "fsname=a\\,b,ro"]));
    let cli =
        Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(h.args)).unwrap();
    let Command::Mount(args) = cli.command else { panic!("not mount") };
    assert_eq!(
        args.request().unwrap().fuse_options,
        [FuseOption::FsName("a,b".into()), FuseOption::ReadOnly]
    );
}

/// `topicfs mount d m ARGS...`'s request, or its error as text.
fn mount_request(extra: &[&str]) -> std::result::Result<MountRequest, String> {
    let mut argv = vec!["topicfs", "mount", "d", "m"];
    argv.extend_from_slice(extra);
    let Command::Mount(args) = Cli::try_parse_from(argv).unwrap().command else {
        panic!("not mount")
    };
    args.request().map_err(|e| e.to_string())
}

#[test]
fn mount_defaults_that_conflict_are_refused_naming_each_setting_and_its_source() {
    let err = mount_request(&[
        "--config",
        "min.compaction.lag.ms=10",
        "--config",
        "max.compaction.lag.ms=5",
    ])
    .unwrap_err();
    assert!(err.contains("conflicting log settings"), "{err}");
    assert!(err.contains("min.compaction.lag.ms (10) must not be above max.compaction.lag.ms (5)"));
    assert!(err.contains("min.compaction.lag.ms from --config min.compaction.lag.ms=10"), "{err}");
    assert!(err.contains("max.compaction.lag.ms from --config max.compaction.lag.ms=5"), "{err}");
    // With server.properties layered below: each named where it comes from.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "node.id=1\nlog.cleaner.max.compaction.lag.ms=5\n").unwrap();
    let file = file.to_str().unwrap();
    let err = mount_request(&["--server-properties", file, "--config", "min.compaction.lag.ms=10"])
        .unwrap_err();
    assert!(err.contains("min.compaction.lag.ms from --config min.compaction.lag.ms=10"), "{err}");
    assert!(
        err.contains(&format!(
            "max.compaction.lag.ms from log.cleaner.max.compaction.lag.ms=5 on line 2 of {file}"
        )),
        "{err}"
    );
    // A mount default above server.properties resolves the conflict; a later --config wins.
    let ok = mount_request(&[
        "--server-properties",
        file,
        "--config",
        "min.compaction.lag.ms=10",
        "--config",
        "max.compaction.lag.ms=20",
    ]);
    assert!(ok.is_ok(), "{ok:?}");
    let ok = mount_request(&[
        "--config",
        "min.compaction.lag.ms=10",
        "--config",
        "max.compaction.lag.ms=5",
        "--config",
        "min.compaction.lag.ms=1",
    ]);
    assert!(ok.is_ok(), "{ok:?}");
    // A named flag's refusal names the flag.
    let err = mount_request(&["--retention-ms", "abc"]).unwrap_err();
    assert!(err.contains("--retention-ms abc: invalid value \"abc\" for retention.ms"), "{err}");
}

#[test]
fn nonempty_is_a_flag_and_an_option() {
    assert!(!mount_request(&[]).unwrap().nonempty);
    assert!(mount_request(&["--nonempty"]).unwrap().nonempty);
    assert!(mount_request(&["-o", "ro,nonempty"]).unwrap().nonempty);
}

#[test]
fn topicfs_unmount_reads_where_a_mount_logs_from_its_command_line() {
    let of = |args: &[&str]| mountpoint_of(&os(args)).unwrap();
    let daemon = of(&["topicfs", "mount", "--daemon-child", "--log-file", "/l/m.log", "d", "m"]);
    assert_eq!(daemon.mountpoint, PathBuf::from("m"));
    assert_eq!(daemon.log_file, Some(PathBuf::from("/l/m.log")));
    let fstab = of(&["topicfs", "mount", "d", "m", "-o", "ro,log_file=rel.log"]);
    assert_eq!(fstab.log_file, Some(PathBuf::from("rel.log")));
    let foreground = of(&["topicfs", "mount", "-f", "d", "m"]);
    assert!(foreground.foreground && foreground.log_file.is_none());
    let said = |c: &crate::mount::MountCommand| {
        crate::mount::described_log(c.foreground, c.log_file.as_deref())
    };
    assert_eq!(said(&daemon), "/l/m.log");
    assert_eq!(said(&foreground), "the stderr of its `topicfs mount -f`");
    assert_eq!(said(&of(&["topicfs", "mount", "d", "m"])), "syslog (identifier topicfs)");
    assert!(mountpoint_of(&os(&["topicfs", "unmount", "m"])).is_none());
}
