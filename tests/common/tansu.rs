//! "A running tansu broker" for tests that need a real Kafka-protocol broker: tansu 0.6.0
//! (built by `scripts/install-deps` into /opt/tansu/bin, or `TOPICFS_TANSU`) with its SQLite
//! storage engine in a temp dir, on a free port of 127.0.0.1.
//!
//! [`Tansu`] kills the broker when dropped, even when the test panics; [`Tansu::kill`] and
//! [`Tansu::restart`] drive fault tests (the restarted broker keeps its port and its data).
//! tansu 0.6 cannot serve TLS itself (doc/cluster-brokers.md): [`TlsProxy`] (socat) terminates
//! TLS in front of a broker started with [`Tansu::start_advertising`] on the proxy's port.
//!
//! SQLite, not the in-memory engine: the memory engine answers ListOffsets by timestamp with 0
//! and can report a batch's base offset + 1 as the log end (doc/cluster-brokers.md).

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tempfile::TempDir;

use super::wait_until;

/// Where the tansu binary is: `TOPICFS_TANSU`, else /opt/tansu/bin/tansu.
pub fn tansu_binary() -> PathBuf {
    let path = std::env::var_os("TOPICFS_TANSU")
        .map_or_else(|| PathBuf::from("/opt/tansu/bin/tansu"), PathBuf::from);
    assert!(
        path.is_file(),
        "tansu broker not found at {} (run scripts/install-deps, or set TOPICFS_TANSU)",
        path.display()
    );
    path
}

/// A free TCP port on 127.0.0.1 (bound and released; the broker binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running tansu broker; killed on drop.
pub struct Tansu {
    child: Option<Child>,
    dir: TempDir,
    port: u16,
    /// The port Metadata names for this broker (a proxy's), when not `port`.
    advertised_port: Option<u16>,
    extra_args: Vec<String>,
    starts: u32,
}

impl Tansu {
    /// Starts a broker with the SQLite engine and waits until it accepts connections.
    pub fn start() -> Tansu {
        Tansu::start_with(&[])
    }

    /// [`Tansu::start`] with extra broker arguments (e.g. `--cert`, `--key`, `--authentication`).
    pub fn start_with(extra_args: &[&str]) -> Tansu {
        Tansu::start_full(None, extra_args)
    }

    /// [`Tansu::start`] with Metadata naming `127.0.0.1:advertised_port` (a proxy in front of
    /// it) as the broker's address, so clients that bootstrap through the proxy stay on it.
    pub fn start_advertising(advertised_port: u16) -> Tansu {
        Tansu::start_full(Some(advertised_port), &[])
    }

    /// [`Tansu::start_advertising`] with extra broker arguments.
    pub fn start_full(advertised_port: Option<u16>, extra_args: &[&str]) -> Tansu {
        let dir = tempfile::Builder::new().prefix("topicfs-tansu-").tempdir().unwrap();
        let mut t = Tansu {
            child: None,
            dir,
            port: free_port(),
            advertised_port,
            extra_args: extra_args.iter().map(ToString::to_string).collect(),
            starts: 0,
        };
        t.spawn();
        t
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "broker already running");
        self.starts += 1;
        let log = File::create(self.dir.path().join(format!("tansu-{}.log", self.starts))).unwrap();
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let advertised = format!("tcp://127.0.0.1:{}", self.advertised_port.unwrap_or(self.port));
        let child = Command::new(tansu_binary())
            .current_dir(self.dir.path())
            .arg("broker")
            .args(["--listener-url", &url, "--advertised-listener-url", &advertised])
            // Relative: tansu opens it under its working directory (the temp dir).
            .args(["--storage-engine", "sqlite://tansu.db"])
            .args(&self.extra_args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let port = self.port;
        wait_until("tansu to accept connections", || {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("tansu exited with {status}: {}", self.log());
            }
            TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
                .is_ok()
        });
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `kafka://127.0.0.1:PORT`.
    pub fn bootstrap(&self) -> String {
        format!("kafka://{}", self.addr())
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The broker's working directory (holds `tansu.db` and the logs).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Everything the broker logged so far (all runs), for failure messages.
    pub fn log(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                std::fs::read_to_string(self.dir.path().join(format!("tansu-{n}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n--- restart ---\n")
    }

    /// Kills the broker (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the broker again on the same port with the same data.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Starts the broker again on the same port with the same data and these extra arguments
    /// instead of the previous ones.
    pub fn restart_with(&mut self, extra_args: &[&str]) {
        self.kill();
        self.extra_args = extra_args.iter().map(ToString::to_string).collect();
        self.spawn();
    }

    /// Runs `tansu ARGS...` (e.g. `user create`) against this broker's directory; panics with
    /// its output when it fails.
    pub fn cli(&self, args: &[&str]) -> String {
        let out =
            Command::new(tansu_binary()).current_dir(self.dir.path()).args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "tansu {args:?} failed: {text}");
        text
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TLS-terminating proxy (`socat OPENSSL-LISTEN`) on 127.0.0.1:`port` in front of a plaintext
/// broker, presenting `cert`/`key` and not asking for client certificates. socat runs in its
/// own process group (one process per connection), which is killed on drop.
pub struct TlsProxy {
    child: Option<Child>,
    port: u16,
}

impl TlsProxy {
    /// Starts socat on `port`, forwarding to 127.0.0.1:`target_port`; waits until it listens.
    pub fn start(port: u16, cert: &Path, key: &Path, target_port: u16) -> TlsProxy {
        TlsProxy::start_verifying(port, cert, key, target_port, None)
    }

    /// [`TlsProxy::start`], and with `client_ca` the proxy requires a client certificate
    /// signed by that CA (mutual TLS: socat's `verify=1 cafile=...`).
    pub fn start_verifying(
        port: u16,
        cert: &Path,
        key: &Path,
        target_port: u16,
        client_ca: Option<&Path>,
    ) -> TlsProxy {
        let verify = match client_ca {
            None => "verify=0".to_string(),
            Some(ca) => format!("verify=1,cafile={}", ca.display()),
        };
        let listen = format!(
            "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={},key={},{verify}",
            cert.display(),
            key.display()
        );
        let child = Command::new("socat")
            .args([&listen, &format!("TCP:127.0.0.1:{target_port}")])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("socat (scripts/install-deps installs it): {e}"));
        let mut proxy = TlsProxy { child: Some(child), port };
        wait_until("socat to listen", || {
            if let Some(status) = proxy.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("socat exited with {status}");
            }
            TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
                .is_ok()
        });
        proxy
    }

    /// `kafka://127.0.0.1:PORT`.
    pub fn bootstrap(&self) -> String {
        format!("kafka://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // The group socat leads (process_group(0) above): it and its per-connection children.
            let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGKILL);
            let _ = c.wait();
        }
    }
}
