//! The mount request: what `topicfs mount` was asked to do ([`MountRequest`]), its `-o` options
//! ([`FuseOption`]) and the owner, group and modes of the files ([`Access`]), with the parsers
//! of their values.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::settings::LogConfig;

/// One `-o` option, as sshfs and mount-s3 users know them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FuseOption {
    /// `allow_other`: every user may access the mount (non-root mounters need
    /// `user_allow_other` in `/etc/fuse.conf`).
    AllowOther,
    /// `allow_root`: root may access it too.
    AllowRoot,
    /// `default_permissions`: the kernel checks mode bits (always on; accepted for habit).
    DefaultPermissions,
    /// `auto_unmount`: fusermount3 unmounts if the daemon dies (needs `allow_other` or
    /// `allow_root`).
    AutoUnmount,
    /// `ro`: same as `--read-only`.
    ReadOnly,
    /// `rw`: the default.
    ReadWrite,
    /// `fsname=NAME`: the source shown in `/proc/mounts` (default: the data dir).
    FsName(String),
    /// `subtype=NAME`: shown as `fuse.NAME` (default: `topicfs`).
    Subtype(String),
    /// `no_passthrough`: sealed segment files are read through the page cache even where the
    /// kernel could read them itself (FUSE passthrough, see [`FuseAdapter`]).
    ///
    /// [`FuseAdapter`]: crate::fuse::FuseAdapter
    NoPassthrough,
    /// `show_internal`: list Kafka's internal topics (`__consumer_offsets`, ...) in the root.
    ShowInternal,
    /// `allow_non_log_dir`: same as `--allow-non-log-dir` (a read-only mount of a directory
    /// that is not a Kafka log dir).
    AllowNonLogDir,
    /// `auto_offset_reset=earliest|latest`: where a consumer group without a usable committed
    /// offset starts reading (`groups/<group>/<p>/next`); default `earliest`.
    AutoOffsetReset(crate::view::groups::ResetPolicy),
    /// `auto_commit`: closing a group's `next` after reading all of it commits its end
    /// (at-most-once, as `kcat -G`); off by default.
    AutoCommit,
    /// `nonempty`: same as `--nonempty` (mount over a directory that is not empty, hiding what
    /// it holds; refused otherwise).
    NonEmpty,
    /// A mount flag passed to the kernel: `nodev`, `nosuid`, `noexec`, `noatime`, `dev`,
    /// `suid`, `exec`, `atime`, `sync`, `async`, `dirsync`.
    Flag(&'static str),
    /// `uid=USER`: the owner shown on every file (a name or a number; default: the mounting
    /// user). See [`Access`].
    Uid(u32),
    /// `gid=GROUP`: the group shown on every file (a name or a number; default: the mounting
    /// user's group).
    Gid(u32),
    /// `umask=MODE`: sets both `file_mode` to `0666 & !MODE` and `dir_mode` to `0777 & !MODE`
    /// (an explicit `file_mode`/`dir_mode` wins, wherever it is given).
    Umask(u16),
    /// `file_mode=MODE`: the permission bits of files (default `0664`).
    FileMode(u16),
    /// `dir_mode=MODE`: the permission bits of directories (default `0755`).
    DirMode(u16),
    /// `memory_budget=SIZE`: same as `--memory-budget` (topicfs's, not the kernel's).
    MemoryBudget(usize),
    /// `background_threads=N` (or its former name `render_threads=N`): same as
    /// `--background-threads`.
    BackgroundThreads(usize),
    /// `cache_dir=DIR`: same as `--cache-dir`; `cache_dir=none` turns the segment cache off.
    CacheDir(Option<PathBuf>),
    /// `cache_size=SIZE`: same as `--cache-size`.
    CacheSize(u64),
    /// `log_file=PATH`: same as `--log-file`.
    LogFile(PathBuf),
    /// `schemas=on|off`: show keys and values in the Confluent wire format decoded (`on`, the
    /// default when a schema source exists) or as bytes (`off`).
    Schemas(bool),
    /// `schemas_topic=NAME`: same as `--schemas-topic`.
    SchemasTopic(String),
    /// `schema_registry=URL`: same as `--schema-registry`.
    SchemaRegistry(String),
    /// `json_payload=string|object`: `.json` lines show a payload that is a JSON object, array,
    /// number or boolean as a string of its text (`string`, kcat's, the default) or as that
    /// JSON value (`object`; see [`crate::view::render`]).
    JsonPayload(crate::view::render::JsonPayload),
    /// `index=TOPIC/FIELD` (repeatable): declares a field index at mount, as writing `FIELD` to
    /// `TOPIC/indexes` does (the way to declare one on a read-only mount, whose files the
    /// kernel keeps from being written).
    Index { topic: String, field: String },
}

/// Kernel mount flags accepted by `-o`.
const FLAGS: &[&str] = &[
    "nodev", "nosuid", "noexec", "noatime", "dev", "suid", "exec", "atime", "sync", "async",
    "dirsync",
];

impl FromStr for FuseOption {
    type Err = Error;

    fn from_str(s: &str) -> Result<FuseOption> {
        let option = match s {
            "allow_other" => FuseOption::AllowOther,
            "allow_root" => FuseOption::AllowRoot,
            "default_permissions" => FuseOption::DefaultPermissions,
            "auto_unmount" => FuseOption::AutoUnmount,
            "ro" => FuseOption::ReadOnly,
            "rw" => FuseOption::ReadWrite,
            "no_passthrough" => FuseOption::NoPassthrough,
            "show_internal" => FuseOption::ShowInternal,
            "allow_non_log_dir" => FuseOption::AllowNonLogDir,
            "auto_commit" => FuseOption::AutoCommit,
            "nonempty" => FuseOption::NonEmpty,
            _ => {
                if let Some(policy) = s.strip_prefix("auto_offset_reset=") {
                    FuseOption::AutoOffsetReset(
                        policy.parse().map_err(|e| Error::Usage(format!("{e}")))?,
                    )
                } else if let Some(name) = s.strip_prefix("fsname=") {
                    FuseOption::FsName(name.to_string())
                } else if let Some(name) = s.strip_prefix("subtype=") {
                    FuseOption::Subtype(name.to_string())
                } else if let Some(flag) = FLAGS.iter().find(|f| **f == s) {
                    FuseOption::Flag(flag)
                } else if let Some(user) = s.strip_prefix("uid=") {
                    FuseOption::Uid(parse_user(user)?)
                } else if let Some(group) = s.strip_prefix("gid=") {
                    FuseOption::Gid(parse_group(group)?)
                } else if let Some(mode) = s.strip_prefix("umask=") {
                    FuseOption::Umask(parse_mode("umask", mode)?)
                } else if let Some(mode) = s.strip_prefix("file_mode=") {
                    FuseOption::FileMode(parse_mode("file_mode", mode)?)
                } else if let Some(mode) = s.strip_prefix("dir_mode=") {
                    FuseOption::DirMode(parse_mode("dir_mode", mode)?)
                } else if let Some(size) = s.strip_prefix("memory_budget=") {
                    FuseOption::MemoryBudget(parse_size(size)?)
                } else if let Some(n) = s
                    .strip_prefix("background_threads=")
                    .or_else(|| s.strip_prefix("render_threads="))
                {
                    FuseOption::BackgroundThreads(parse_background_threads(n)?)
                } else if let Some(dir) = s.strip_prefix("cache_dir=") {
                    FuseOption::CacheDir(parse_cache_dir(dir)?)
                } else if let Some(size) = s.strip_prefix("cache_size=") {
                    FuseOption::CacheSize(parse_size(size)? as u64)
                } else if let Some(path) = s.strip_prefix("log_file=") {
                    FuseOption::LogFile(parse_log_file(path)?)
                } else if let Some(on) = s.strip_prefix("schemas=") {
                    FuseOption::Schemas(match on {
                        "on" => true,
                        "off" => false,
                        _ => return Err(Error::Usage(format!("schemas={on}: on or off"))),
                    })
                } else if let Some(topic) = s.strip_prefix("schemas_topic=") {
                    FuseOption::SchemasTopic(parse_schemas_topic(topic)?)
                } else if let Some(url) = s.strip_prefix("schema_registry=") {
                    FuseOption::SchemaRegistry(url.to_string())
                } else if let Some(shown) = s.strip_prefix("json_payload=") {
                    FuseOption::JsonPayload(shown.parse().map_err(Error::Usage)?)
                } else if let Some(spec) = s.strip_prefix("index=") {
                    let Some((topic, field)) = spec.split_once('/').filter(|(t, _)| !t.is_empty())
                    else {
                        return Err(Error::Usage(format!("index={spec}: TOPIC/FIELD")));
                    };
                    crate::view::field_index::FieldIndexes::parse_field(field)
                        .map_err(|why| Error::Usage(format!("index={spec}: {why}")))?;
                    FuseOption::Index { topic: topic.to_string(), field: field.to_string() }
                } else {
                    return Err(Error::Usage(format!(
                        "unknown mount option {s:?} (known: allow_other, allow_root, \
                         default_permissions, auto_unmount, ro, rw, no_passthrough, \
                         show_internal, allow_non_log_dir, nonempty, auto_offset_reset=earliest|latest, auto_commit, \
                         fsname=NAME, subtype=NAME, uid=USER, gid=GROUP, umask=MODE, \
                         file_mode=MODE, dir_mode=MODE, memory_budget=SIZE, background_threads=N, \
                         cache_dir=DIR|none, cache_size=SIZE, log_file=PATH, schemas=on|off, schemas_topic=NAME, \
                         schema_registry=URL, json_payload=string|object, index=TOPIC/FIELD, {})",
                        FLAGS.join(", ")
                    )));
                }
            }
        };
        Ok(option)
    }
}

/// Splits a comma-separated option list (`-o`, fstab's fourth field) into its options: a
/// comma preceded by a backslash (`cleanup.policy=compact\,delete`) belongs to the value and
/// is kept as a plain comma (mount(8) and mount.fuse3 pass `\,` through unchanged, as
/// libfuse's own option parser reads it); every other character is kept as it is.
pub fn split_options(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&',') => {
                current.push(',');
                chars.next();
            }
            ',' => out.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    out.push(current);
    out
}

/// An option written back into a list [`split_options`] reads: each comma escaped.
pub fn escape_option(option: &str) -> String {
    option.replace(',', "\\,")
}

/// `schemas_topic=NAME` / `--schemas-topic NAME`: a topic name Kafka accepts.
pub fn parse_schemas_topic(topic: &str) -> Result<String> {
    crate::format::file_name::validate_topic_name(topic)
        .map_err(|why| Error::Usage(format!("schemas topic {topic:?}: {why}")))?;
    Ok(topic.to_string())
}

/// Where a mount's schemas come from (issue 35; `--schemas-topic`, `--schema-registry`,
/// `-o schemas=off`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaSettings {
    /// `schemas=on|off`; `None`: on when a source exists (the topic at mount, or a registry).
    pub enabled: Option<bool>,
    /// The topic holding the registry's schemas; `None`: `_schemas`.
    pub topic: Option<String>,
    /// `--schema-registry URL[,URL...]`: ask the registry's REST API instead of a topic.
    pub registry: Option<String>,
    /// `--schema-registry-config NAME=VALUE`: the registry client's settings by their usual
    /// names (`basic.auth.user.info`, `schema.registry.ssl.ca.location`, ...).
    pub registry_config: Vec<(String, String)>,
}

/// `cache_dir=DIR` / `--cache-dir DIR`: a directory, or `none` (no segment cache).
pub fn parse_cache_dir(dir: &str) -> Result<Option<PathBuf>> {
    match dir {
        "" => Err(Error::Usage("cache_dir needs a directory (or none)".into())),
        "none" => Ok(None),
        _ => Ok(Some(PathBuf::from(dir))),
    }
}

/// `log_file=PATH` / `--log-file PATH`: not empty.
pub fn parse_log_file(path: &str) -> Result<PathBuf> {
    if path.is_empty() {
        return Err(Error::Usage("log_file needs a path".into()));
    }
    Ok(PathBuf::from(path))
}

/// `uid=USER`: a user name (looked up in the user database when the option is parsed) or a
/// number.
pub fn parse_user(user: &str) -> Result<u32> {
    if let Ok(uid) = user.parse::<u32>() {
        return Ok(uid);
    }
    match nix::unistd::User::from_name(user) {
        Ok(Some(found)) => Ok(found.uid.as_raw()),
        Ok(None) => Err(Error::Usage(format!("uid={user}: no such user"))),
        Err(err) => Err(Error::Usage(format!("uid={user}: cannot look the user up: {err}"))),
    }
}

/// `gid=GROUP`: a group name or a number.
pub fn parse_group(group: &str) -> Result<u32> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(group) {
        Ok(Some(found)) => Ok(found.gid.as_raw()),
        Ok(None) => Err(Error::Usage(format!("gid={group}: no such group"))),
        Err(err) => Err(Error::Usage(format!("gid={group}: cannot look the group up: {err}"))),
    }
}

/// An octal mode of permission bits only (`0644`, `644`, `0o644`): set-id and sticky bits
/// mean nothing on a topicfs mount and are refused.
pub fn parse_mode(name: &str, mode: &str) -> Result<u16> {
    let digits = mode.strip_prefix("0o").unwrap_or(mode);
    match u16::from_str_radix(digits, 8) {
        Ok(bits) if !digits.is_empty() && bits <= 0o777 => Ok(bits),
        _ => Err(Error::Usage(format!(
            "{name}={mode}: expected an octal mode from 000 to 777, such as 0640"
        ))),
    }
}

/// Who may do what on the mount: the owner and group shown on every file, and the permission
/// bits the kernel checks (`default_permissions` is always on).
///
/// A file shows `file_mode` reduced to what the file allows: the read bits for streams, info,
/// segment and inspection files (read-only content), the write bits for `append` and
/// `append.json` (write-only). A directory shows `dir_mode`, without its write bits where
/// nothing can be created (everything but the root and topic directories of a read-write
/// mount). The defaults, `0664` and `0755`, give streams `0444`, appends `0220`, the root and
/// topic directories `0755` and the others `0555`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// `None`: the mounting user.
    pub uid: Option<u32>,
    /// `None`: the mounting user's group.
    pub gid: Option<u32>,
    pub file_mode: u16,
    pub dir_mode: u16,
}

pub use crate::fs::{DEFAULT_DIR_MODE, DEFAULT_FILE_MODE};

impl Default for Access {
    fn default() -> Access {
        Access { uid: None, gid: None, file_mode: DEFAULT_FILE_MODE, dir_mode: DEFAULT_DIR_MODE }
    }
}

impl Access {
    /// The access the options say, in order (a later `uid=` wins over an earlier one); an
    /// explicit `file_mode`/`dir_mode` wins over `umask` wherever either is given.
    pub fn from_options<'a>(options: impl IntoIterator<Item = &'a FuseOption>) -> Access {
        let mut access = Access::default();
        let (mut file_mode, mut dir_mode, mut umask) = (None, None, None);
        for option in options {
            match option {
                FuseOption::Uid(uid) => access.uid = Some(*uid),
                FuseOption::Gid(gid) => access.gid = Some(*gid),
                FuseOption::Umask(mask) => umask = Some(*mask),
                FuseOption::FileMode(mode) => file_mode = Some(*mode),
                FuseOption::DirMode(mode) => dir_mode = Some(*mode),
                _ => {}
            }
        }
        if let Some(mask) = umask {
            access.file_mode = 0o666 & !mask;
            access.dir_mode = 0o777 & !mask;
        }
        access.file_mode = file_mode.unwrap_or(access.file_mode);
        access.dir_mode = dir_mode.unwrap_or(access.dir_mode);
        access
    }
}

/// A size in bytes: a number, optionally followed by K, M or G (powers of 1024; `KiB`, `MB`
/// and the like are read the same way), e.g. `64M`, `1G`, `65536`.
pub fn parse_size(s: &str) -> Result<usize> {
    let text = s.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(Error::Usage(format!(
                "{s:?}: not a size (a number, optionally with K, M or G)"
            )));
        }
    };
    let n: usize = number.parse().map_err(|_| {
        Error::Usage(format!("{s:?}: not a size (a number, optionally with K, M or G)"))
    })?;
    n.checked_mul(1 << shift).ok_or_else(|| Error::Usage(format!("{s:?}: too large")))
}

/// A number of background workers: 1 to [`crate::executor::MAX_THREADS`].
pub fn parse_background_threads(s: &str) -> Result<usize> {
    let max = crate::executor::MAX_THREADS;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(Error::Usage(format!(
            "background_threads={s:?}: expected a number from 1 to {max}"
        ))),
    }
}

/// A cluster to mount: bootstrap servers and client settings.
#[derive(Clone, Debug)]
pub struct ClusterMount {
    pub bootstrap: Vec<crate::cluster::BrokerAddr>,
    pub config: crate::cluster::ClientConfig,
}

/// Everything `topicfs mount` was asked to do.
#[derive(Clone, Debug)]
pub struct MountRequest {
    /// `kafka://...` as the source: the cluster (then `data_dir` is that spec, not a path).
    pub cluster: Option<ClusterMount>,
    pub data_dir: PathBuf,
    /// The log dirs of a local mount (`DIR1,DIR2,...`: a broker's `log.dirs`), each as given
    /// and made absolute; one for a single dir, none for a cluster.
    pub log_dirs: Vec<(String, PathBuf)>,
    pub mountpoint: PathBuf,
    /// `--read-only` or `-o ro`.
    pub read_only: bool,
    pub fuse_options: Vec<FuseOption>,
    pub log_config: LogConfig,
    /// The settings of `log_config` given by name (`--config` and the named flags): the
    /// mount-default layer of every topic's settings ([`crate::storage::LogDirs::set_mount_defaults`]).
    pub log_settings: std::collections::BTreeMap<String, String>,
    /// `--server-properties FILE`: the broker's static settings in topic-level names
    /// (`retention.ms`, ...), read at mount; empty without the flag. The broker settings'
    /// `static_defaults` (below `--config` and the KRaft metadata's settings).
    pub server_properties: std::collections::BTreeMap<String, String>,
    /// Partitions of topics created with `mkdir`.
    pub partitions: u32,
    /// `--max-partitions`: the most partitions a topic may get through the mount (`mkdir` of
    /// a topic or of a partition); at most [`crate::storage::log_dir::KAFKA_MAX_PARTITIONS`].
    pub max_partitions: u32,
    /// `--allow-non-log-dir` or `-o allow_non_log_dir`: a read-only mount may serve a directory
    /// that is not a Kafka log dir (a writable one never does).
    pub allow_non_log_dir: bool,
    /// `--nonempty` or `-o nonempty`: the mountpoint may hold entries (hidden while mounted);
    /// without it a mountpoint that is not empty is refused.
    pub nonempty: bool,
    /// FUSE worker threads.
    pub threads: usize,
    /// Bytes of rendered data held beyond a request, mount-wide (read-ahead windows and kept
    /// renderings; see [`crate::view::budget`]).
    pub memory_budget: usize,
    /// `--key-index-memory`: bytes of sealed key indexes held in memory (see
    /// [`crate::storage::key_index::set_memory_limit`]).
    pub key_index_memory: u64,
    /// `--background-threads`: workers of the background executor ([`crate::executor`]).
    pub background_threads: usize,
    /// Which records of transactions streams show.
    pub isolation: crate::view::txn::Isolation,
    /// `--sizing-budget`: log bytes a stream's stat/open may render (the log dir's
    /// [`Known::sizing_budget`](crate::source::Known::sizing_budget)).
    /// `None`: the backend's default ([`crate::storage::LOCAL_SIZING_BUDGET`] for a log dir,
    /// [`crate::cluster::source::CLUSTER_SIZING_BUDGET`] for a cluster).
    pub sizing_budget: Option<u64>,
    /// `log.retention.check.interval.ms`: how often retention runs on a read-write mount.
    pub retention_check_interval: Duration,
    /// `log.cleaner.backoff.ms`: the pause between two log cleaner passes (read-write mount).
    pub cleaner_backoff: Duration,
    /// `log.cleaner.dedupe.buffer.size`: bytes of the log cleaner's offset map.
    pub cleaner_dedupe_buffer_bytes: usize,
    /// `--cache-dir`/`--cache-size`: the segment cache (see [`crate::storage::cache`]).
    pub cache: crate::storage::cache::CacheSettings,
    /// Where schemas come from, if anywhere.
    pub schemas: SchemaSettings,
    /// Owner, group and modes of the files.
    pub access: Access,
    /// `--log-file`/`-o log_file=`, absolute: where the mount logs (see
    /// [`super::logging`]); `None`: stderr with `-f`, else syslog or the default file.
    pub log_file: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_options_parse_like_sshfs() {
        assert_eq!("allow_other".parse::<FuseOption>().ok(), Some(FuseOption::AllowOther));
        assert_eq!(
            "fsname=kafka".parse::<FuseOption>().ok(),
            Some(FuseOption::FsName("kafka".into()))
        );
        assert_eq!("noatime".parse::<FuseOption>().ok(), Some(FuseOption::Flag("noatime")));
        assert_eq!("no_passthrough".parse::<FuseOption>().ok(), Some(FuseOption::NoPassthrough));
        assert!("bogus".parse::<FuseOption>().unwrap_err().to_string().contains("allow_other"));
    }

    #[test]
    fn index_is_a_topic_and_a_field() {
        assert_eq!(
            "index=orders/address.city".parse::<FuseOption>().ok(),
            Some(FuseOption::Index { topic: "orders".into(), field: "address.city".into() })
        );
        assert_eq!(
            "index=t/@header.trace".parse::<FuseOption>().ok(),
            Some(FuseOption::Index { topic: "t".into(), field: "@header.trace".into() })
        );
        for bad in ["index=", "index=orders", "index=/user", "index=orders/", "index=orders/@key"] {
            let e = bad.parse::<FuseOption>().unwrap_err().to_string();
            assert!(e.contains("index="), "{bad}: {e}");
        }
    }

    #[test]
    fn json_payload_is_string_or_object() {
        use crate::view::render::JsonPayload;
        assert_eq!(
            "json_payload=object".parse::<FuseOption>().ok(),
            Some(FuseOption::JsonPayload(JsonPayload::Object))
        );
        assert_eq!(
            "json_payload=string".parse::<FuseOption>().ok(),
            Some(FuseOption::JsonPayload(JsonPayload::String))
        );
        for bad in ["json_payload=", "json_payload=json", "json_payload=Object"] {
            let err = bad.parse::<FuseOption>().unwrap_err().to_string();
            assert!(err.contains("string or object"), "{bad}: {err}");
        }
    }

    #[test]
    fn access_options_take_names_numbers_and_octal_modes() {
        assert_eq!("uid=0".parse::<FuseOption>().ok(), Some(FuseOption::Uid(0)));
        assert_eq!("uid=root".parse::<FuseOption>().ok(), Some(FuseOption::Uid(0)));
        assert_eq!("gid=root".parse::<FuseOption>().ok(), Some(FuseOption::Gid(0)));
        assert_eq!(
            "gid=4294967294".parse::<FuseOption>().ok(),
            Some(FuseOption::Gid(4_294_967_294))
        );
        assert_eq!("umask=027".parse::<FuseOption>().ok(), Some(FuseOption::Umask(0o027)));
        assert_eq!("file_mode=0640".parse::<FuseOption>().ok(), Some(FuseOption::FileMode(0o640)));
        assert_eq!("dir_mode=750".parse::<FuseOption>().ok(), Some(FuseOption::DirMode(0o750)));
        assert_eq!("dir_mode=0o750".parse::<FuseOption>().ok(), Some(FuseOption::DirMode(0o750)));
        let no_user = "uid=no-such-user-here".parse::<FuseOption>().unwrap_err().to_string();
        assert!(no_user.contains("no such user"), "{no_user}");
        let no_group = "gid=no-such-group-here".parse::<FuseOption>().unwrap_err().to_string();
        assert!(no_group.contains("no such group"), "{no_group}");
        for bad in ["file_mode=0800", "file_mode=4755", "dir_mode=", "umask=rwx", "umask=-1"] {
            let err = bad.parse::<FuseOption>().unwrap_err().to_string();
            assert!(err.contains("octal mode"), "{bad}: {err}");
        }
    }

    #[test]
    fn umask_sets_both_modes_and_explicit_modes_win() {
        let access = |opts: &[&str]| {
            let options: Vec<FuseOption> = opts.iter().map(|o| o.parse().unwrap()).collect();
            Access::from_options(&options)
        };
        assert_eq!(access(&[]), Access::default());
        assert_eq!((access(&[]).file_mode, access(&[]).dir_mode), (0o664, 0o755));
        let a = access(&["umask=027"]);
        assert_eq!((a.file_mode, a.dir_mode), (0o640, 0o750));
        // file_mode wins over umask, before or after it; dir_mode still follows umask.
        for opts in [["file_mode=0600", "umask=022"], ["umask=022", "file_mode=0600"]] {
            let a = access(&opts);
            assert_eq!((a.file_mode, a.dir_mode), (0o600, 0o755), "{opts:?}");
        }
        let a = access(&["uid=1", "gid=2", "uid=3"]);
        assert_eq!((a.uid, a.gid), (Some(3), Some(2)), "the last uid= counts");
    }
}
