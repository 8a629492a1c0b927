//! The command line: `topicfs mount DATA_DIR MOUNTPOINT [options]` and `topicfs unmount`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::cluster::ClientConfig;
use crate::cluster::config::{is_bootstrap_spec, parse_bootstrap};
use crate::error::{Error, Result};
use crate::mount::{self, Access, ClusterMount, FuseOption, Mode, MountRequest};
use crate::storage::LogConfig;
use crate::view::txn::Isolation;

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
  fusermount3 -u /mnt/kafka";

const MOUNT_ABOUT: &str = "Mount a Kafka log directory";

const MOUNT_LONG_ABOUT: &str = "\
Mount a Kafka log directory.

By default topicfs starts a daemon and returns once the mount is live (exit status 0), or
prints why it could not mount (exit status 1): the data dir is missing or locked by a running
broker, the mountpoint is not a directory or already mounted, /dev/fuse is missing. With -f it
stays in the foreground and logs to stderr.

The daemon stops cleanly (pending appends written, indexes trimmed, checkpoints and the
clean-shutdown marker written) on `fusermount3 -u MOUNTPOINT`, `umount MOUNTPOINT`,
`topicfs unmount MOUNTPOINT`, SIGTERM, SIGINT (Ctrl-C with -f) or SIGHUP.

Logging follows RUST_LOG (default `info,fuser=error`; e.g. RUST_LOG=debug, RUST_LOG=topicfs=trace): to
stderr with -f, to syslog (identifier topicfs) in the background.

Access: every file is owned by the mounting user and group unless uid=/gid= (or --uid/--gid)
say otherwise; file_mode= and dir_mode= (default 0664 and 0755), or umask=, set the permission
bits, which the kernel checks (default_permissions is always on). A file shows the read bits
(streams, info, segments) or the write bits (append files) of file_mode; other users get in
only with allow_other.

From /etc/fstab, with topicfs installed in /usr/bin (the Debian package) or /usr/local/bin:

  /var/lib/kafka/data  /mnt/kafka  fuse.topicfs  ro,allow_other,gid=kafka,file_mode=0640,dir_mode=0750,nofail  0 0

or type `topicfs` (mount(8) runs /sbin/mount.topicfs, a link to the binary). Options there are
the -o options above plus read_only, partitions=N, threads=N, isolation=LEVEL,
sizing_budget=BYTES, retention_check_interval_ms=MS and any log setting by its Kafka name (segment.bytes=1048576);
mount(8)'s own (defaults, noauto, user, nofail, _netdev, x-systemd.*) are ignored.";

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
    /// Unmount a topicfs mount (umount as root, fusermount3 -u otherwise); the daemon then stops
    /// cleanly.
    #[command(after_help = "Example:\n  topicfs unmount /mnt/kafka")]
    Unmount {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
}

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
    /// show_internal (list __consumer_offsets and Kafka's other internal topics),
    /// auto_offset_reset=earliest|latest (where a consumer group without a committed offset
    /// starts; default earliest), auto_commit (closing a group's next after reading all of it
    /// commits its end: at-most-once), fsname=NAME (default: the data dir), subtype=NAME (default:
    /// topicfs), nodev, nosuid, noexec, noatime, dev, suid, exec, atime, sync, async, dirsync; and topicfs's own memory_budget=SIZE and
    /// render_threads=N (as --memory-budget, --render-threads; -o wins).
    ///
    /// Example: -o allow_other,fsname=kafka,gid=analysts,file_mode=0640,dir_mode=0750
    #[arg(short = 'o', value_name = "OPT[,OPT...]", value_delimiter = ',', value_parser = parse_fuse_option)]
    pub options: Vec<FuseOption>,

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

    /// FUSE worker threads: requests served at the same time (a slow read does not stall a
    /// `tail -f` poll).
    ///
    /// Example: --threads 4
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,

    /// Log bytes a stream's stat or open may read to learn its exact size, from where the
    /// last one stopped; a stream whose end is farther shows size 0 (not yet known) until it
    /// is read to its end or later stats get there (see SEMANTICS.md, "Streams as files").
    /// Accepts K, M, G suffixes (powers of 1024). Default 256M for a log dir, 16M for a
    /// cluster (each byte of sizing is fetched over the network).
    ///
    /// Example: --sizing-budget 64M
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub sizing_budget: Option<u64>,

    /// Memory for rendered bytes kept beyond a request, shared by every open stream: read-ahead
    /// windows and the rendering of the batch a read stopped inside. Each handle reading
    /// sequentially gets a fair share; one over its share reads on demand (slower, never an
    /// error). Default 64M; K, M, G suffixes. Also `-o memory_budget=SIZE`.
    ///
    /// Example: --memory-budget 256M
    #[arg(long, value_name = "SIZE", value_parser = mount::parse_size)]
    pub memory_budget: Option<usize>,

    /// Read-ahead render workers, shared by every open stream (never a thread per handle).
    /// Default: the number of cores. Also `-o render_threads=N`.
    ///
    /// Example: --render-threads 4
    #[arg(long, value_name = "N", value_parser = mount::parse_render_threads)]
    pub render_threads: Option<usize>,

    /// log.retention.check.interval.ms: how often a read-write mount deletes segments past
    /// retention.ms / retention.bytes (Kafka's broker setting, default 300000). The first pass
    /// runs after 30 s, or after this interval if it is shorter.
    ///
    /// Example: --retention-check-interval-ms 60000
    #[arg(long, value_name = "MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Log settings")]
    pub retention_check_interval_ms: u64,

    /// A log setting by its Kafka topic-level name (repeatable; applied after the named flags
    /// below): segment.bytes, segment.ms, segment.jitter.ms, segment.index.bytes,
    /// index.interval.bytes, max.message.bytes, retention.ms, retention.bytes,
    /// message.timestamp.type, compression.type, file.delete.delay.ms.
    ///
    /// Example: --config retention.ms=86400000 --config compression.type=zstd
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

fn parse_fuse_option(s: &str) -> Result<FuseOption> {
    s.parse()
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

impl MountArgs {
    /// The log configuration: defaults, then the named flags, then each `--config` in order.
    pub fn log_config(&self) -> Result<LogConfig> {
        let mut config = LogConfig::default();
        let named = [
            ("segment.bytes", &self.segment_bytes),
            ("segment.ms", &self.segment_ms),
            ("segment.index.bytes", &self.segment_index_bytes),
            ("index.interval.bytes", &self.index_interval_bytes),
            ("max.message.bytes", &self.max_message_bytes),
            ("retention.ms", &self.retention_ms),
            ("retention.bytes", &self.retention_bytes),
            ("message.timestamp.type", &self.message_timestamp_type),
            ("compression.type", &self.compression_type),
        ];
        for (key, value) in named {
            if let Some(value) = value {
                config.set(key, value)?;
            }
        }
        for pair in &self.config {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("--config {pair:?}: expected KEY=VALUE")))?;
            config.set(key.trim(), value)?;
        }
        Ok(config)
    }

    /// Owner, group and modes: the `-o` access options in order, then the flags (which win).
    pub fn access(&self) -> Access {
        let flags = [
            self.uid.map(FuseOption::Uid),
            self.gid.map(FuseOption::Gid),
            self.umask.map(FuseOption::Umask),
            self.file_mode.map(FuseOption::FileMode),
            self.dir_mode.map(FuseOption::DirMode),
        ];
        Access::from_options(self.options.iter().chain(flags.iter().flatten()))
    }

    /// The cluster of a `kafka://` source: bootstrap servers and the client settings
    /// (defaults, then `--command-config`, then each `--config` in order). `None` for a local
    /// data dir, where `--command-config` is refused.
    pub fn cluster(&self) -> Result<Option<ClusterMount>> {
        let source = self.data_dir.to_string_lossy();
        if !is_bootstrap_spec(&source) {
            if let Some(file) = &self.command_config {
                return Err(Error::Usage(format!(
                    "--command-config {}: only for a cluster mount (kafka://HOST:PORT)",
                    file.display()
                )));
            }
            return Ok(None);
        }
        let log_flags = [
            ("--segment-bytes", &self.segment_bytes),
            ("--segment-ms", &self.segment_ms),
            ("--segment-index-bytes", &self.segment_index_bytes),
            ("--index-interval-bytes", &self.index_interval_bytes),
            ("--max-message-bytes", &self.max_message_bytes),
            ("--retention-ms", &self.retention_ms),
            ("--retention-bytes", &self.retention_bytes),
            ("--message-timestamp-type", &self.message_timestamp_type),
            ("--compression-type", &self.compression_type),
        ];
        if let Some((flag, _)) = log_flags.iter().find(|(_, v)| v.is_some()) {
            return Err(Error::Usage(format!(
                "{flag} is a log setting of a local mount; a cluster's topics keep the brokers' \
                 (client settings go in --config KEY=VALUE)"
            )));
        }
        let bootstrap = parse_bootstrap(&source).map_err(|e| Error::Usage(e.to_string()))?;
        let mut config = ClientConfig::default();
        if let Some(file) = &self.command_config {
            config.load_properties_file(file).map_err(|e| Error::Usage(e.to_string()))?;
        }
        for pair in &self.config {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("--config {pair:?}: expected KEY=VALUE")))?;
            config.set(key.trim(), value, "--config").map_err(|e| Error::Usage(e.to_string()))?;
        }
        Ok(Some(ClusterMount { bootstrap, config }))
    }

    /// The mount request these arguments describe.
    pub fn request(&self) -> Result<MountRequest> {
        let cluster = self.cluster()?;
        let log_config = if cluster.is_some() { LogConfig::default() } else { self.log_config()? };
        Ok(MountRequest {
            cluster,
            access: self.access(),
            data_dir: self.data_dir.clone(),
            mountpoint: self.mountpoint.clone(),
            read_only: self.read_only || self.options.contains(&FuseOption::ReadOnly),
            fuse_options: self.options.clone(),
            log_config,
            partitions: self.partitions,
            threads: usize::from(self.threads),
            memory_budget: self
                .options
                .iter()
                .rev()
                .find_map(|o| match o {
                    FuseOption::MemoryBudget(n) => Some(*n),
                    _ => None,
                })
                .or(self.memory_budget)
                .unwrap_or(crate::view::budget::DEFAULT_MEMORY_BUDGET),
            render_threads: self
                .options
                .iter()
                .rev()
                .find_map(|o| match o {
                    FuseOption::RenderThreads(n) => Some(*n),
                    _ => None,
                })
                .or(self.render_threads)
                .unwrap_or_else(crate::view::readahead::AheadPool::default_threads),
            isolation: self.isolation,
            sizing_budget: self.sizing_budget,
            retention_check_interval: std::time::Duration::from_millis(
                self.retention_check_interval_ms,
            ),
        })
    }

    /// Foreground, background, or the daemon child of a background mount.
    pub fn mode(&self) -> Mode {
        if self.daemon_child {
            Mode::DaemonChild
        } else if self.foreground {
            Mode::Foreground
        } else {
            Mode::Background
        }
    }
}

/// A byte count: digits with an optional K, M or G suffix (powers of 1024).
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
        Command::Unmount { mountpoint } => mount::unmount(&mountpoint),
    }
}

/// A mount helper's command line turned into `topicfs mount` arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct HelperArgs {
    /// `mount SOURCE MOUNTPOINT [flags]`, what follows the program name.
    pub args: Vec<OsString>,
    /// mount(8)'s `-f` (fake): check everything, mount nothing.
    pub fake: bool,
}

/// fstab support. topicfs is run as a mount helper in two ways:
/// - as `mount.topicfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS]` by mount(8), for fstab type
///   `topicfs` (with `/sbin/mount.topicfs` a link to the binary);
/// - as `topicfs SOURCE MOUNTPOINT -o OPTIONS` by mount.fuse3, for fstab type `fuse.topicfs`.
///
/// Both become `topicfs mount SOURCE MOUNTPOINT ...`: FUSE options stay in `-o`; `ro` also
/// means `--read-only`; `partitions=N`, `threads=N`, `isolation=LEVEL`, `sizing_budget=BYTES` and
/// `retention_check_interval_ms=MS` become those flags (`memory_budget=SIZE` and
/// `render_threads=N` stay `-o` options, which `topicfs mount` reads too); an option with a dot in its name
/// (`segment.bytes=1048576`) is a log setting (`--config`); options that are for mount(8) or
/// systemd (`defaults`, `auto`, `noauto`, `user`, `users`, `nouser`, `owner`, `nofail`,
/// `_netdev`, `x-*`, `comment=*`) are dropped. Anything else is refused, unless `-s`
/// (sloppy) was given. `None`: `argv` is an ordinary topicfs command line.
pub fn helper_args(argv: &[OsString]) -> Result<Option<HelperArgs>> {
    let program = argv
        .first()
        .map(|p| Path::new(p).file_name().unwrap_or_default().to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = argv.get(1..).unwrap_or_default();
    let as_mount_helper = program.starts_with("mount.");
    let as_fuse_helper = !as_mount_helper
        && rest.len() >= 2
        && rest.first().is_some_and(|a| {
            let a = a.to_string_lossy();
            !a.starts_with('-')
                && a != "help"
                && Cli::command().find_subcommand(a.as_ref()).is_none()
        });
    if !as_mount_helper && !as_fuse_helper {
        return Ok(None);
    }
    let (mut positional, mut options, mut sloppy, mut fake) =
        (Vec::new(), Vec::new(), false, false);
    let mut words = rest.iter();
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        match text.as_ref() {
            "-o" => {
                let list = words
                    .next()
                    .ok_or_else(|| Error::Usage("-o needs a list of options".into()))?;
                options.extend(list.to_string_lossy().split(',').map(str::to_string));
            }
            "-s" => sloppy = true,
            "-f" => fake = true,
            "-n" | "-v" => {}
            "-t" => {
                words.next();
            }
            _ if text.starts_with("-o") => {
                options.extend(text.get(2..).unwrap_or_default().split(',').map(str::to_string));
            }
            _ if text.starts_with('-') && text.len() > 1 => {
                return Err(Error::Usage(format!("mount helper: unknown flag {text:?}")));
            }
            _ => positional.push(word.clone()),
        }
    }
    let [source, mountpoint] = <[OsString; 2]>::try_from(positional).map_err(|p| {
        Error::Usage(format!("mount helper: expected SOURCE MOUNTPOINT, got {p:?}"))
    })?;
    let mut args = vec![OsString::from("mount"), source, mountpoint];
    let (mut fuse_options, mut read_only) = (Vec::new(), false);
    for option in options.iter().map(|o| o.trim()).filter(|o| !o.is_empty()) {
        let (key, value) = match option.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (option, None),
        };
        let for_mount_8 = matches!(
            (key, value),
            (
                "defaults"
                    | "auto"
                    | "noauto"
                    | "user"
                    | "users"
                    | "nouser"
                    | "owner"
                    | "nofail"
                    | "_netdev",
                None
            ) | ("comment", Some(_))
        ) || key.starts_with("x-");
        if for_mount_8 {
            continue;
        }
        // topicfs's own flags, spelled with `_` (fstab style) or `-`.
        let flag = key.replace('_', "-");
        match (flag.as_str(), value) {
            // `ro` among the FUSE options below means read-only too (`MountArgs::request`).
            ("read-only", None) => read_only = true,
            (
                "partitions"
                | "threads"
                | "isolation"
                | "retention-check-interval-ms"
                | "sizing-budget",
                Some(v),
            ) => {
                args.push(format!("--{flag}").into());
                args.push(v.into());
            }
            _ if key.contains('.') && value.is_some() => {
                args.push("--config".into());
                args.push(option.into());
            }
            _ => match option.parse::<FuseOption>() {
                Ok(_) => fuse_options.push(option.to_string()),
                Err(_) if sloppy => {}
                Err(err) => return Err(Error::Usage(format!("mount helper: {err}"))),
            },
        }
    }
    if read_only {
        args.push("--read-only".into());
    }
    if !fuse_options.is_empty() {
        args.push("-o".into());
        args.push(fuse_options.join(",").into());
    }
    Ok(Some(HelperArgs { args, fake }))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

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
        std::fs::write(&props, "# a comment\nclient.id=fromfile\nrequest.timeout.ms=5000\n")
            .unwrap();
        let props = props.to_str().unwrap();
        let r =
            mount(&["--command-config", props, "--config", "request.timeout.ms=7"], "kafka://h:1")
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
        let h =
            helper(&["mount.topicfs", "d", "m", "-o", "ro,show_internal,auto_offset_reset=latest"])
                .unwrap()
                .unwrap();
        assert_eq!(
            h.args,
            os(&["mount", "d", "m", "-o", "ro,show_internal,auto_offset_reset=latest"])
        );
    }

    #[test]
    fn bad_settings_are_refused_with_their_key() {
        let cli = Cli::try_parse_from(["topicfs", "mount", "d", "m", "--config", "segment.bytes"])
            .unwrap();
        let Command::Mount(args) = cli.command else { panic!("not mount") };
        assert!(args.request().unwrap_err().to_string().contains("KEY=VALUE"));
        assert!(Cli::try_parse_from(["topicfs", "mount", "d", "m", "-o", "bogus"]).is_err());
        assert!(Cli::try_parse_from(["topicfs", "mount", "d", "m", "--partitions", "0"]).is_err());
    }

    #[test]
    fn access_flags_and_options_agree_and_flags_win() {
        let parse = |words: &[&str]| {
            let cli =
                Cli::try_parse_from(["topicfs", "mount", "d", "m"].iter().chain(words)).unwrap();
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
    fn memory_budget_and_render_threads_come_from_flags_or_o_options() {
        let request = |words: &[&str]| -> Result<MountRequest, String> {
            let argv = ["topicfs", "mount", "d", "m"].iter().chain(words);
            let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
            let Command::Mount(args) = cli.command else { panic!("not mount") };
            args.request().map_err(|e| e.to_string())
        };
        let defaults = request(&[]).unwrap();
        assert_eq!(defaults.memory_budget, 64 << 20);
        assert_eq!(defaults.render_threads, crate::view::readahead::AheadPool::default_threads());
        let flags = request(&["--memory-budget", "256M", "--render-threads", "4"]).unwrap();
        assert_eq!((flags.memory_budget, flags.render_threads), (256 << 20, 4));
        let o = request(&["-o", "ro,memory_budget=1G,render_threads=8"]).unwrap();
        assert_eq!((o.memory_budget, o.render_threads), (1 << 30, 8));
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
            &["--render-threads", "65"],
            &["-o", "render_threads=x"],
            &["-o", "memory_budget=12Q"],
        ] {
            assert!(request(bad).is_err(), "{bad:?} accepted");
        }
        // fstab: both stay -o options.
        let h =
            helper(&["mount.topicfs", "d", "m", "-o", "ro,memory_budget=128M,render_threads=2"])
                .unwrap()
                .unwrap();
        assert_eq!(
            h.args,
            os(&["mount", "d", "m", "-o", "ro,memory_budget=128M,render_threads=2"])
        );
    }
}
