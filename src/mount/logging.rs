//! The daemon's logging: `RUST_LOG` filtering, to stderr or to syslog.

/// The log filter when `RUST_LOG` is unset: our messages from `info` up, fuser's errors only
/// (fuser 0.18 warns "Failed to umount filesystem" after every `fusermount3 -u`, when its own
/// second unmount finds nothing left to unmount).
pub const DEFAULT_LOG_FILTER: &str = "info,fuser=error";

/// Logging: `RUST_LOG` syntax (default [`DEFAULT_LOG_FILTER`]), to stderr in the foreground and to syslog
/// (identifier `topicfs`, facility daemon) in the daemon. Without a syslog socket the daemon
/// logs to its stderr, which is `/dev/null`.
pub fn init_logging(daemon: bool) {
    let env = || env_logger::Env::default().default_filter_or(DEFAULT_LOG_FILTER);
    // ureq logs the HTTP wire at trace, the registry's Authorization header included: never
    // more than debug for it (which logs only an allow-list of headers).
    let builder = || {
        let mut builder = env_logger::Builder::from_env(env());
        if env_logger::Builder::from_env(env()).build().filter() == log::LevelFilter::Trace {
            builder.filter_module("ureq", log::LevelFilter::Debug);
            builder.filter_module("ureq_proto", log::LevelFilter::Debug);
        }
        builder
    };
    if daemon {
        let filter = builder().build();
        let formatter = syslog::Formatter3164 {
            facility: syslog::Facility::LOG_DAEMON,
            hostname: None,
            process: "topicfs".into(),
            pid: std::process::id(),
        };
        if let Ok(writer) = syslog::unix(formatter) {
            let max = filter.filter();
            let logger = SyslogLogger { filter, syslog: syslog::BasicLogger::new(writer) };
            if log::set_boxed_logger(Box::new(logger)).is_ok() {
                log::set_max_level(max);
            }
            return;
        }
    }
    let _ = builder().try_init();
}

/// Syslog output with `RUST_LOG` filtering.
struct SyslogLogger {
    filter: env_logger::Logger,
    syslog: syslog::BasicLogger,
}

impl log::Log for SyslogLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.filter.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.filter.matches(record) {
            self.syslog.log(record);
        }
    }

    fn flush(&self) {
        self.syslog.flush();
    }
}
