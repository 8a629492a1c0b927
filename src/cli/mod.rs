//! The command line: `topicfs mount DATA_DIR MOUNTPOINT [options]` and `topicfs unmount`.
//!
//! - `mod.rs` (here): the clap definitions (help texts, [`Cli`], [`Command`], [`MountArgs`],
//!   their value parsers) and [`main`];
//! - `options.rs`: [`MountArgs`] into what the mount needs (log configuration, access, cluster
//!   client settings, the mount request and mode);
//! - `helper.rs`: mount-helper (fstab) command lines into `topicfs mount` ([`helper_args`]);
//! - `tests.rs`: their unit tests.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::error::{Error, Result};
use crate::mount::{self, FuseOption};
use crate::view::txn::Isolation;

mod helper;
mod options;
#[cfg(test)]
mod tests;

pub use helper::{HelperArgs, helper_args};

const ABOUT: &str = "Kafka partition logs as a filesystem: browse with ls/cat/tail/jq, produce \
                     with file writes";

const LONG_ABOUT: &str = "\
Kafka partition logs as a filesystem.

topicfs mounts a Kafka log directory (one entry of a broker's log.dirs, read and written
byte-compatibly) so that every partition is a directory of files:

  MNT/<topic>/info                   partitions and their log start/end offsets
  MNT/<topic>/<p>/info               log start/end offset, segments, bytes, timestamps
  MNT/<topic>/<p>/by-offset/<spec>   records from an offset: 0, -10, 100..200, with .json or .raw
  MNT/<topic>/<p>/by-time/<spec>     records from a time: 2026-12-02, -1h, T1..T2
  MNT/<topic>/<p>/append             write: one record per line
  MNT/<topic>/<p>/append.json        write: one JSON envelope (as .json streams show) per line
  MNT/<topic>/<p>/segments/          the raw .log/.index/.timeindex files, read-only
  MNT/<topic>/groups/<group>/offsets consumer group: committed offset, log end, lag; write
                                     `<partition> <offset>` lines to commit
  MNT/<topic>/groups/<group>/<p>/next  records from the committed offset to the end

mkdir MNT/<topic> creates a topic; mkdir MNT/<topic>/<n> adds partition n; mkdir
MNT/<topic>/groups/<group> creates a consumer group.";

const EXAMPLES: &str = "\
Examples:
  topicfs mount /var/lib/kafka/data /mnt/kafka --read-only
  cat /mnt/kafka/orders/0/by-offset/-10.json | jq .payload
  printf 'hello\\n' >> /mnt/kafka/orders/0/append
  topicfs unmount /mnt/kafka";

const MOUNT_ABOUT: &str = "Mount a Kafka log directory";

const MOUNT_LONG_ABOUT: &str = "\
Mount a Kafka log directory.

By default topicfs starts a daemon and returns once the mount is live (exit status 0), or
prints why it could not mount (exit status 1): the data dir is missing, locked by a running
broker, or not a Kafka log dir (--allow-non-log-dir serves one read-only), the mountpoint is
not a directory, not empty (--nonempty mounts over it), already mounted, inside the data dir
or a dead FUSE mount (clear it with fusermount3 -u), /dev/fuse is missing or not usable by
this user. Those are checked before anything is written into the data dir. A log setting
Kafka would refuse (in a flag, --config or the --server-properties file, named with its line)
or log settings that conflict (min.compaction.lag.ms above max.compaction.lag.ms) are refused
with exit status 2 before that. A data dir locked by another process is waited for up
to 5 s (a topicfs just unmounted may still be shutting down). Relative paths are taken from the
directory the command runs in. With -f it stays in the foreground and logs to stderr.

The daemon stops cleanly (pending appends written, indexes trimmed, checkpoints and the
clean-shutdown marker written, the lock released) on `fusermount3 -u MOUNTPOINT`, `umount
MOUNTPOINT`, `topicfs unmount MOUNTPOINT`, SIGTERM, SIGINT (Ctrl-C with -f) or SIGHUP. Only
`topicfs unmount` returns after that shutdown; fusermount3 -u and umount return as soon as the
mount is gone, while the daemon may still be writing. On a signal, files still open under the
mount fail with ENOTCONN 2 s later at most, and the daemon exits.

Logging follows RUST_LOG (default `info,fuser=error`; e.g. RUST_LOG=debug,
RUST_LOG=topicfs=trace): to --log-file FILE if given, else to stderr with -f, else to syslog
(identifier topicfs), or without syslog to /var/log/topicfs/<mountpoint>.log (as root;
~/.local/state/topicfs/ otherwise; see --log-file). `cat MNT/@info` names the log (log:),
`cat MNT/@log` shows its last warnings and errors.

Access: every file is owned by the mounting user and group unless uid=/gid= (or --uid/--gid)
say otherwise; file_mode= and dir_mode= (default 0664 and 0755), or umask=, set the permission
bits, which the kernel checks (default_permissions is always on). A file shows the read bits
(streams, info, segments) or the write bits (append files) of file_mode; other users get in
only with allow_other.

From /etc/fstab, with topicfs installed in /usr/bin (the Debian package) or /usr/local/bin:

  /var/lib/kafka/data  /mnt/kafka  fuse.topicfs  ro,allow_other,gid=kafka,file_mode=0640,dir_mode=0750,nofail  0 0

or type `topicfs` (mount(8) runs /sbin/mount.topicfs, a link to the binary). Options there are
the -o options above, every flag of this command but -f spelled name=VALUE (partitions=3,
server_properties=FILE, cleaner_backoff_ms=60000, config=NAME=VALUE) or name alone for one
without a value (read_only, nonempty), and any log setting by its Kafka name
(segment.bytes=1048576). A comma inside a value is written \\, (cleanup.policy=compact\\,delete),
in -o too. mount(8)'s own (defaults, noauto, user, nofail, _netdev, x-systemd.*) are ignored.";

const MOUNT_EXAMPLES: &str = "\
Examples:
  topicfs mount /var/lib/kafka/data /mnt/kafka
  topicfs mount -f --read-only /var/lib/kafka/data /mnt/kafka
  topicfs mount data mnt -o allow_other,fsname=kafka --partitions 3 --threads 4
  topicfs mount data mnt --segment-bytes 1048576 --config retention.ms=86400000
  RUST_LOG=debug topicfs mount -f data mnt";

/// `topicfs`: Kafka partition logs as a filesystem.
#[derive(Debug, Parser)]
#[command(name = "topicfs", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(about = MOUNT_ABOUT, long_about = MOUNT_LONG_ABOUT, after_help = MOUNT_EXAMPLES)]
    Mount(Box<MountArgs>),
    #[command(about = UNMOUNT_ABOUT, long_about = UNMOUNT_LONG_ABOUT, after_help = UNMOUNT_EXAMPLES)]
    Unmount {
        /// The mountpoint.
        mountpoint: PathBuf,

        /// Detach the mount even if files under it are open (umount -l, fusermount3 -u -z) and
        /// return at once: the daemon serves the open files until the last is closed, then
        /// shuts down cleanly.
        #[arg(long, short = 'l')]
        lazy: bool,

        /// Seconds to wait for the daemon to exit after the unmount (default 30).
        ///
        /// Example: --timeout 120
        #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
        timeout: u64,
    },
}

const UNMOUNT_ABOUT: &str = "Unmount a topicfs mount and wait for its daemon's clean shutdown";

const UNMOUNT_LONG_ABOUT: &str = "\
Unmount a topicfs mount and wait for its daemon's clean shutdown.

Unmounts MOUNTPOINT (umount as root, fusermount3 -u otherwise), then waits until the daemon
serving it has exited and, for a read-write mount of a log dir, the data dir is closed cleanly:
pending appends written, checkpoints and .kafka_cleanshutdown written, .lock released. When it
returns with exit status 0 the data dir may be mounted again or given to a broker at once.

Exit status 1 with a message when MOUNTPOINT is not mounted; when it is busy (files or working
directories under it in use: the processes holding it are listed; close them, or use --lazy);
or when the daemon (named by its pid) has not exited within --timeout, or exited without
writing .kafka_cleanshutdown.

`fusermount3 -u MOUNTPOINT` or `umount MOUNTPOINT` alone only detach the mount: they return as
soon as the kernel has let go of it, while the daemon is still shutting down (usually well under
a second, longer with many segments to sync). A mount of the same data dir started in that
window waits for the lock (up to 5 s) instead of failing.";

const UNMOUNT_EXAMPLES: &str = "\
Examples:
  topicfs unmount /mnt/kafka
  topicfs unmount --lazy /mnt/kafka
  topicfs unmount /mnt/kafka && kafka-server-start.sh server.properties";

/// Arguments of `topicfs mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// The Kafka log directory (a broker's log.dirs entry, or an empty directory to start one),
    /// or a cluster's bootstrap servers as kafka://HOST:PORT[,HOST:PORT...].
    pub data_dir: PathBuf,

    /// An existing, empty, not mounted directory.
    pub mountpoint: PathBuf,

    /// Client settings of a cluster mount (`kafka://...`) from a Java-style `.properties` file,
    /// applied before each `--config`. Refused for a local mount.
    ///
    /// Example: topicfs mount kafka://127.0.0.1:9092 mnt --command-config client.properties
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,

    /// Stay in the foreground and log to stderr; Ctrl-C unmounts.
    ///
    /// Example: topicfs mount -f data mnt
    #[arg(short, long)]
    pub foreground: bool,

    /// Never change the data dir: no lock, no recovery writes, appends and mkdir fail with
    /// EROFS. Safe next to a running broker.
    ///
    /// Example: topicfs mount --read-only /var/lib/kafka/data mnt
    #[arg(long)]
    pub read_only: bool,

    /// Which records of transactions streams show: read_committed hides aborted records and
    /// ends streams at the last stable offset (kcat's default); read_uncommitted shows every
    /// record of every non-control batch.
    ///
    /// Example: --isolation read_uncommitted
    #[arg(long, value_name = "LEVEL", default_value = "read_committed", value_parser = parse_isolation)]
    pub isolation: Isolation,

    /// Mount options, comma-separated or repeated: allow_other, allow_root,
    /// default_permissions (always on), auto_unmount (with allow_other or allow_root), ro, rw,
    /// uid=USER, gid=GROUP, umask=MODE, file_mode=MODE, dir_mode=MODE (see Access below),
    /// no_passthrough (sealed segment files through the page cache, not FUSE passthrough),
    /// show_internal (list __consumer_offsets and Kafka's other internal topics), nonempty (as
    /// --nonempty),
    /// auto_offset_reset=earliest|latest (where a consumer group without a committed offset
    /// starts; default earliest), auto_commit (closing a group's next after reading all of it
    /// commits its end: at-most-once), fsname=NAME (default: the data dir), subtype=NAME (default:
    /// topicfs), nodev, nosuid, noexec, noatime, dev, suid, exec, atime, sync, async, dirsync; and topicfs's own memory_budget=SIZE and
    /// background_threads=N (as --memory-budget, --background-threads; -o wins; render_threads=N
    /// is its former name); json_payload=object (.json lines show a payload that is a JSON
    /// object, array, number or boolean as that JSON, so `jq .payload.user` needs no fromjson;
    /// default string, kcat's); index=TOPIC/FIELD (repeatable: declares a field index at mount,
    /// as `echo FIELD > MNT/TOPIC/indexes` does, also on a read-only mount).
    ///
    /// A comma inside a value is written `\,`.
    ///
    /// Example: -o allow_other,fsname=kafka,gid=analysts,file_mode=0640,dir_mode=0750
    #[arg(short = 'o', value_name = "OPT[,OPT...]", value_parser = parse_fuse_options)]
    pub options: Vec<FuseOptions>,

    /// Owner of every file (a user name or number; default: the mounting user). Same as
    /// `-o uid=USER`.
    ///
    /// Example: --uid kafka
    #[arg(long, value_name = "USER", value_parser = mount::parse_user, help_heading = "Access")]
    pub uid: Option<u32>,

    /// Group of every file (a group name or number; default: the mounting user's group). Same
    /// as `-o gid=GROUP`.
    ///
    /// Example: --gid analysts
    #[arg(long, value_name = "GROUP", value_parser = mount::parse_group, help_heading = "Access")]
    pub gid: Option<u32>,

    /// Sets --file-mode to 0666 and --dir-mode to 0777 without these bits (an explicit
    /// --file-mode or --dir-mode wins). Same as `-o umask=MODE`.
    ///
    /// Example: --umask 027
    #[arg(long, value_name = "MODE", value_parser = parse_umask, help_heading = "Access")]
    pub umask: Option<u16>,

    /// Permission bits of files (default 0664): streams, info, segment and inspection files
    /// show its read bits, append files its write bits. Same as `-o file_mode=MODE`.
    ///
    /// Example: --file-mode 0640
    #[arg(long, value_name = "MODE", value_parser = parse_file_mode, help_heading = "Access")]
    pub file_mode: Option<u16>,

    /// Permission bits of directories (default 0755): the root and topic directories of a
    /// read-write mount show them all (write: mkdir), the others without write bits. Same as
    /// `-o dir_mode=MODE`.
    ///
    /// Example: --dir-mode 0750
    #[arg(long, value_name = "MODE", value_parser = parse_dir_mode, help_heading = "Access")]
    pub dir_mode: Option<u16>,

    /// Partitions of a topic created with `mkdir MNT/<topic>`.
    ///
    /// Example: --partitions 3
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub partitions: u32,

    /// The most partitions a topic may get through the mount: `mkdir` of a topic with more
    /// (--partitions) or of a partition numbered past it fails with EINVAL, creating nothing.
    /// At most 2147483647 (Kafka numbers partitions with an INT32).
    ///
    /// Example: --max-partitions 100000
    #[arg(long, value_name = "N", default_value_t = crate::fs::DEFAULT_MAX_PARTITIONS, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub max_partitions: u32,

    /// Mount over a mountpoint that is not empty, hiding what it holds until unmounted
    /// (refused without it). Same as `-o nonempty`.
    #[arg(long)]
    pub nonempty: bool,

    /// Mount read-only a directory that is not a Kafka log dir (one without meta.properties
    /// holding names a broker never writes, such as a copy of /etc). Refused for a writable
    /// mount, which would write Kafka files into it. Same as `-o allow_non_log_dir`.
    #[arg(long)]
    pub allow_non_log_dir: bool,

    /// FUSE worker threads: requests served at the same time (a slow read does not stall a
    /// `tail -f` poll).
    ///
    /// Example: --threads 4
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,

    /// Log bytes a stream's stat or open may read to learn its exact size, from where the
    /// last one stopped (at most 1 MiB by the request itself, the rest in the background); a
    /// stream whose end is farther shows size 0 (not yet known) until it is read to its end or
    /// later stats get there (see SEMANTICS.md, "Streams as files").
    /// Accepts K, M, G suffixes (powers of 1024). Default 256M for a log dir, 64K for a
    /// cluster (one Fetch: each byte of sizing is fetched over the network).
    ///
    /// Example: --sizing-budget 64M
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub sizing_budget: Option<u64>,

    /// Where what topicfs learns about sealed segments (rendered sizes, transactions) is kept
    /// across remounts: a directory outside the data dir, created if missing; `none` keeps
    /// nothing. Safe to delete at any time. Default /var/cache/topicfs. Also `-o cache_dir=DIR`.
    ///
    /// Example: --cache-dir /var/cache/topicfs
    #[arg(long, value_name = "DIR|none", value_parser = parse_cache_dir_flag)]
    pub cache_dir: Option<CacheDirFlag>,

    /// The topic Confluent Schema Registry keeps its schemas in (its kafkastore.topic; default
    /// _schemas): keys and values in the Confluent wire format are shown decoded in .json
    /// streams with the schemas read from it, live. Also `-o schemas_topic=NAME`; `-o
    /// schemas=off` shows them as bytes.
    ///
    /// Example: --schemas-topic _schemas
    #[arg(long, value_name = "NAME", value_parser = mount::parse_schemas_topic)]
    pub schemas_topic: Option<String>,

    /// Ask a Schema Registry's REST API for schemas instead of reading its topic (several URLs
    /// comma-separated: the next is tried when one does not answer). Also
    /// `-o schema_registry=URL`.
    ///
    /// Example: --schema-registry http://registry:8081
    #[arg(long, value_name = "URL")]
    pub schema_registry: Option<String>,

    /// A setting of the registry client, by the name Confluent's clients use
    /// (basic.auth.user.info=USER:PASSWORD, basic.auth.credentials.source=USER_INFO,
    /// schema.registry.ssl.ca.location=FILE, schema.registry.request.timeout.ms=MS).
    /// Repeatable.
    ///
    /// Example: --schema-registry-config basic.auth.user.info=svc:secret
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_key_value)]
    pub schema_registry_config: Vec<(String, String)>,

    /// The most the cache dir's entries may take; the least recently used go first. Default
    /// 256M; K, M, G suffixes. Also `-o cache_size=SIZE`.
    ///
    /// Example: --cache-size 1G
    #[arg(long, value_name = "SIZE", value_parser = mount::parse_size)]
    pub cache_size: Option<usize>,

    /// Memory for rendered bytes kept beyond a request, shared by every open stream: read-ahead
    /// windows and the rendering of the batch a read stopped inside. Each handle reading
    /// sequentially gets a fair share; one over its share reads on demand (slower, never an
    /// error). On a cluster it also caps the bytes of all Fetches in flight: a read whose
    /// fetch does not fit waits for others (at most request.timeout.ms). Default 64M; K, M, G
    /// suffixes. Also `-o memory_budget=SIZE`.
    ///
    /// Example: --memory-budget 256M
    #[arg(long, value_name = "SIZE", value_parser = mount::parse_size)]
    pub memory_budget: Option<usize>,

    /// Memory for built key indexes (`by-key/`, `latest/`, `keys`) of sealed segments, all
    /// partitions together: past it the least recently used are dropped from memory, and
    /// loaded again from the segment cache (or rebuilt) at their next query. The active
    /// segments' indexes are not counted. Default 256M; K, M, G suffixes.
    ///
    /// Example: --key-index-memory 1G
    #[arg(long, value_name = "SIZE", value_parser = mount::parse_size)]
    pub key_index_memory: Option<usize>,

    /// Workers of the mount's one background executor (read-ahead, deferred stats, mount
    /// sizing, key-index builds and cache writes, by that priority), shared by every open
    /// stream (never a thread per handle). Default: the number of cores. Also
    /// `-o background_threads=N`.
    ///
    /// Example: --background-threads 4
    #[arg(long, value_name = "N", value_parser = mount::parse_background_threads)]
    pub background_threads: Option<usize>,

    /// The former name of --background-threads (also `-o render_threads=N`); the newer name
    /// wins when both are given.
    #[arg(long, value_name = "N", value_parser = mount::parse_background_threads)]
    pub render_threads: Option<usize>,

    /// Where the mount logs, appended to with times and levels; renamed FILE.1 (replacing the
    /// previous one) at 10 MiB and started again. Default: stderr with -f; in the background
    /// syslog (identifier topicfs), or without one (no /dev/log, as in a container)
    /// /var/log/topicfs/<M>.log as root, else $XDG_STATE_HOME/topicfs/<M>.log
    /// (~/.local/state/topicfs/<M>.log), <M> the mountpoint as `systemd-escape --path` writes
    /// it. MNT/@info names it (log:), MNT/@log shows the last 100 warnings and errors. Also
    /// `-o log_file=FILE`.
    ///
    /// Example: --log-file /var/log/topicfs/kafka.log
    #[arg(long, value_name = "FILE", value_parser = mount::parse_log_file)]
    pub log_file: Option<PathBuf>,

    /// log.retention.check.interval.ms: how often a read-write mount deletes segments past
    /// retention.ms / retention.bytes (Kafka's broker setting, default 300000). The first pass
    /// runs after 30 s, or after this interval if it is shorter.
    ///
    /// Example: --retention-check-interval-ms 60000
    #[arg(long, value_name = "MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Log settings")]
    pub retention_check_interval_ms: u64,

    /// A broker's static settings file (`server.properties`): its log settings
    /// (`log.retention.hours`, `log.cleanup.policy`, `log.segment.bytes`, ...) become the
    /// defaults of topics without an override of their own, mapped to topic-level names with
    /// Kafka's precedence (`log.retention.ms` over `log.retention.minutes` over
    /// `log.retention.hours`); below `--config` and the settings the data dir's KRaft metadata
    /// holds. Read and validated at mount: a file that does not parse, a value a broker would
    /// refuse or settings that conflict are refused, naming the line. Local mounts only.
    ///
    /// Example: --server-properties /etc/kafka/server.properties
    #[arg(long, value_name = "FILE", help_heading = "Log settings")]
    pub server_properties: Option<PathBuf>,

    /// log.cleaner.backoff.ms: the pause between two passes of the log cleaner, which compacts
    /// the topics with cleanup.policy=compact on a read-write mount (Kafka's broker setting,
    /// default 15000).
    ///
    /// Example: --cleaner-backoff-ms 60000
    #[arg(long, value_name = "MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Log settings")]
    pub cleaner_backoff_ms: u64,

    /// log.cleaner.dedupe.buffer.size: memory of the log cleaner's offset map (24 bytes per
    /// key; a log with more distinct keys than fit is cleaned in several passes). Kafka's
    /// default 128M; K, M, G suffixes.
    ///
    /// Example: --cleaner-dedupe-buffer-size 256M
    #[arg(long, value_name = "SIZE", default_value = "128M", value_parser = mount::parse_size, help_heading = "Log settings")]
    pub cleaner_dedupe_buffer_size: usize,

    /// A log setting by its Kafka topic-level name (repeatable; applied after the named flags
    /// below): the default of every topic without its own override (MNT/<topic>/config).
    /// Every topic-level setting of Kafka 4.0: cleanup.policy, retention.ms, retention.bytes,
    /// segment.bytes, segment.ms, segment.jitter.ms, segment.index.bytes,
    /// index.interval.bytes, max.message.bytes, message.timestamp.type, compression.type,
    /// delete.retention.ms, min.compaction.lag.ms, max.compaction.lag.ms,
    /// min.cleanable.dirty.ratio, ... (SEMANTICS.md, "Topic settings").
    ///
    /// On a cluster mount (kafka://...), a client setting by its Kafka client name instead
    /// (applied after --command-config): client.id, request.timeout.ms, metadata.max.age.ms,
    /// fetch.max.bytes, max.partition.fetch.bytes, fetch.min.bytes, fetch.max.wait.ms,
    /// isolation.level, acks, enable.idempotence,
    /// compression.type, security.protocol, ssl.ca.location, ssl.truststore.location,
    /// ssl.truststore.type, ssl.certificate.location, ssl.key.location, sasl.mechanism,
    /// sasl.username, sasl.password, replication.factor, retry.backoff.ms,
    /// retry.backoff.max.ms, reconnect.backoff.max.ms, socket.connection.setup.timeout.ms
    /// (SEMANTICS.md, "Cluster mounts").
    ///
    /// Example: --config retention.ms=86400000 --config compression.type=zstd
    ///
    /// Example: topicfs mount kafka://127.0.0.1:9092 mnt --config security.protocol=SSL
    /// --config ssl.certificate.location=client.pem --config ssl.key.location=client.key
    #[arg(long = "config", value_name = "KEY=VALUE", help_heading = "Log settings")]
    pub config: Vec<String>,

    /// segment.bytes: roll to a new segment before the .log file would exceed this
    /// (default 1073741824).
    ///
    /// Example: --segment-bytes 104857600
    #[arg(long, value_name = "BYTES", help_heading = "Log settings")]
    pub segment_bytes: Option<String>,

    /// segment.ms: roll once a segment spans this much record time (default 604800000, 7 days).
    ///
    /// Example: --segment-ms 3600000
    #[arg(long, value_name = "MS", help_heading = "Log settings")]
    pub segment_ms: Option<String>,

    /// segment.index.bytes: preallocated size of each .index/.timeindex (default 10485760).
    ///
    /// Example: --segment-index-bytes 1048576
    #[arg(long, value_name = "BYTES", help_heading = "Log settings")]
    pub segment_index_bytes: Option<String>,

    /// index.interval.bytes: log bytes between two offset index entries (default 4096).
    ///
    /// Example: --index-interval-bytes 8192
    #[arg(long, value_name = "BYTES", help_heading = "Log settings")]
    pub index_interval_bytes: Option<String>,

    /// max.message.bytes: largest batch as stored; a longer line fails its write with EFBIG
    /// (default 1048588).
    ///
    /// Example: --max-message-bytes 4194304
    #[arg(long, value_name = "BYTES", help_heading = "Log settings")]
    pub max_message_bytes: Option<String>,

    /// retention.ms: delete segments whose newest record is older; -1 keeps all
    /// (default 604800000, 7 days).
    ///
    /// Example: --retention-ms -1
    #[arg(long, value_name = "MS", allow_hyphen_values = true, help_heading = "Log settings")]
    pub retention_ms: Option<String>,

    /// retention.bytes: delete the oldest segments while a partition is larger; -1 = no limit
    /// (default -1).
    ///
    /// Example: --retention-bytes 1073741824
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true, help_heading = "Log settings")]
    pub retention_bytes: Option<String>,

    /// message.timestamp.type: CreateTime (keep the writer's timestamps, default) or
    /// LogAppendTime (stamp each batch with the append time).
    ///
    /// Example: --message-timestamp-type LogAppendTime
    #[arg(long, value_name = "TYPE", help_heading = "Log settings")]
    pub message_timestamp_type: Option<String>,

    /// compression.type: producer (default; appends are uncompressed), uncompressed, gzip,
    /// snappy, lz4 or zstd.
    ///
    /// Example: --compression-type zstd
    #[arg(long, value_name = "CODEC", help_heading = "Log settings")]
    pub compression_type: Option<String>,

    /// Internal: this process is the daemon child of a background mount.
    #[arg(long = "daemon-child", hide = true)]
    pub daemon_child: bool,
}

/// The options of one `-o` list (see [`mount::split_options`]; empty items are skipped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuseOptions(pub Vec<FuseOption>);

fn parse_fuse_options(s: &str) -> Result<FuseOptions> {
    let options = mount::split_options(s).into_iter().filter(|o| !o.is_empty());
    Ok(FuseOptions(options.map(|o| o.parse()).collect::<Result<_>>()?))
}

fn parse_umask(s: &str) -> Result<u16> {
    mount::parse_mode("umask", s)
}

fn parse_file_mode(s: &str) -> Result<u16> {
    mount::parse_mode("file_mode", s)
}

fn parse_dir_mode(s: &str) -> Result<u16> {
    mount::parse_mode("dir_mode", s)
}

/// `--cache-dir DIR|none`.
#[derive(Clone, Debug)]
pub struct CacheDirFlag(pub Option<PathBuf>);

fn parse_cache_dir_flag(s: &str) -> Result<CacheDirFlag> {
    mount::parse_cache_dir(s).map(CacheDirFlag)
}

/// A byte count: digits with an optional K, M or G suffix (powers of 1024).
/// `NAME=VALUE` of a setting (the name trimmed and not empty).
fn parse_key_value(s: &str) -> Result<(String, String)> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(Error::Usage(format!("{s:?}: expected NAME=VALUE"))),
    }
}

fn parse_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    digits.parse::<u64>().ok().and_then(|n| n.checked_mul(unit)).ok_or_else(|| {
        Error::Usage(format!("{s:?}: expected a byte count such as 16777216, 64K, 16M or 1G"))
    })
}

fn parse_isolation(s: &str) -> Result<Isolation> {
    s.parse()
}

/// The mountpoint and log a process's command line (`/proc/<pid>/cmdline`: program name
/// first) names if it is a `topicfs mount` (or a mount helper's form of one), as written
/// there; how `topicfs unmount` recognizes the daemon serving a mount and names its log.
pub fn mountpoint_of(argv: &[OsString]) -> Option<mount::MountCommand> {
    let args = match helper_args(argv) {
        Ok(Some(helper)) => helper.args,
        Ok(None) => argv.get(1..)?.to_vec(),
        Err(_) => return None,
    };
    let cli = Cli::try_parse_from(std::iter::once(OsString::from("topicfs")).chain(args)).ok()?;
    match cli.command {
        Command::Mount(mount) => Some(mount::MountCommand {
            log_file: mount.log_file(),
            foreground: mount.foreground,
            mountpoint: mount.mountpoint,
        }),
        Command::Unmount { .. } => None,
    }
}

/// Parses the command line and runs it; the process's exit status. `version` is what
/// `--version` prints after the name (the binary adds the commit to the crate version).
pub fn main(version: &'static str) -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let (args, fake) = match helper_args(&argv) {
        Ok(Some(helper)) => (helper.args, helper.fake),
        Ok(None) => (argv.get(1..).unwrap_or_default().to_vec(), false),
        Err(err) => {
            eprintln!("topicfs: {err}");
            return ExitCode::from(2);
        }
    };
    let matches = Cli::command()
        .version(version)
        .get_matches_from(std::iter::once(OsString::from("topicfs")).chain(args.clone()));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    match cli.command {
        Command::Mount(mount_args) => match mount_args.request() {
            Ok(_) if fake => ExitCode::SUCCESS,
            Ok(request) => mount::run(request, mount_args.mode(), &args),
            Err(err) => {
                eprintln!("topicfs: {err}");
                ExitCode::from(2)
            }
        },
        Command::Unmount { mountpoint, lazy, timeout } => mount::unmount(
            &mount::UnmountRequest {
                mountpoint,
                lazy,
                timeout: std::time::Duration::from_secs(timeout),
            },
            mountpoint_of,
        ),
    }
}
