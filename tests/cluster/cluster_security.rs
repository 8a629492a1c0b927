//! SASL of the cluster client against tansu: SCRAM users created through the broker, wrong
//! passwords refused as authentication failures (EACCES) naming the broker.
//!
//! TLS through a real mount: tansu 0.6's command line refuses `--cert` together with `--key` (a
//! clap group makes them exclusive), so it cannot serve TLS itself (doc/cluster-brokers.md);
//! the test puts a TLS-terminating proxy (socat) in front of it, with a CA made in the test, and
//! the broker advertises the proxy's port so every connection of the client goes through TLS.

use crate::common;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use common::tansu::{Tansu, TlsProxy, free_port};
use common::{Dirs, MountGuard, failed_mount, sh};
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig};

fn connect(t: &Tansu, settings: &[String]) -> topicfs::Result<Client> {
    let mut c = ClientConfig::default();
    c.set_pair("request.timeout.ms=10000").unwrap();
    for s in settings {
        c.set_pair(s).unwrap();
    }
    Client::connect(parse_bootstrap(&t.bootstrap()).unwrap(), c)
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA (`NAME-ca.pem`) and a server certificate for 127.0.0.1 signed by it
/// (`NAME-server.pem`, `NAME-server.key`).
fn make_ca(dir: &Path, name: &str) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let (ca_key, ca) = (format!("{name}-ca.key"), format!("{name}-ca.pem"));
    let mut args = vec!["req", "-x509"];
    args.extend(ec);
    let subject = format!("/CN=topicfs test CA {name}");
    args.extend(["-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj", &subject]);
    args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    openssl(dir, &args);
    let (key, csr, cert) =
        (format!("{name}-server.key"), format!("{name}-server.csr"), format!("{name}-server.pem"));
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=127.0.0.1"]);
    openssl(dir, &args);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

/// A client certificate `NAME-client.pem` with key `NAME-client.key`, signed by the CA
/// `CA-ca.pem` of [`make_ca`].
fn make_client_cert(dir: &Path, ca: &str, name: &str) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let (key, csr, cert) =
        (format!("{name}-client.key"), format!("{name}-client.csr"), format!("{name}-client.pem"));
    let mut args = vec!["req"];
    args.extend(ec);
    let subject = format!("/CN=topicfs test client {name}");
    args.extend(["-keyout", &key, "-out", &csr, "-subj", &subject]);
    openssl(dir, &args);
    std::fs::write(
        dir.join("client-ext.cnf"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    let (ca_pem, ca_key) = (format!("{ca}-ca.pem"), format!("{ca}-ca.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "2",
            "-extfile",
            "client-ext.cnf",
        ],
    );
}

#[test]
fn cluster_sasl_scram_authenticates_and_a_wrong_password_is_eacces() {
    let mut t = Tansu::start();
    let url = format!("tcp://{}", t.addr());
    t.cli(&["user", "create", "--broker", &url, "--mechanism", "scram256", "alice", "s3cret-256"]);
    t.cli(&["user", "create", "--broker", &url, "--mechanism", "scram512", "bob", "s3cret-512"]);
    // The users live in the broker's storage; the broker now requires authentication.
    t.restart_with(&["--authentication"]);

    for (mech, user, password) in
        [("SCRAM-SHA-256", "alice", "s3cret-256"), ("SCRAM-SHA-512", "bob", "s3cret-512")]
    {
        let sasl = |password: &str| {
            vec![
                "security.protocol=SASL_PLAINTEXT".to_string(),
                format!("sasl.mechanism={mech}"),
                format!("sasl.username={user}"),
                format!("sasl.password={password}"),
            ]
        };
        let c = connect(&t, &sasl(password)).unwrap_or_else(|e| panic!("{mech}: {e}\n{}", t.log()));
        assert!(c.metadata().unwrap().brokers.len() == 1);
        let err = connect(&t, &sasl("wrong")).err().unwrap();
        assert_eq!(err.errno(), libc::EACCES, "{mech}: {err}");
        assert!(err.to_string().contains(&t.addr()), "{err}");
    }
}

/// A broker behind a TLS proxy whose certificate is signed by the CA `tls-ca.pem` in `dir`
/// (a second CA, `other-ca.pem`, signed nothing the proxy presents).
fn broker_behind_tls(dir: &Path) -> (Tansu, TlsProxy) {
    make_ca(dir, "tls");
    make_ca(dir, "other");
    let proxy_port = free_port();
    let broker = Tansu::start_advertising(proxy_port);
    let proxy = TlsProxy::start(
        proxy_port,
        &dir.join("tls-server.pem"),
        &dir.join("tls-server.key"),
        broker.port(),
    );
    (broker, proxy)
}

#[test]
fn cluster_tls_mount_reads_and_appends_through_a_tls_proxy_and_a_wrong_ca_fails_the_mount() {
    let certs = tempfile::tempdir().unwrap();
    let (_broker, proxy) = broker_behind_tls(certs.path());
    let ca = format!("ssl.ca.location={}", certs.path().join("tls-ca.pem").display());
    let source = OsString::from(proxy.bootstrap());
    let args = [
        "--config",
        "request.timeout.ms=10000",
        "--config",
        "security.protocol=SSL",
        "--config",
        &ca,
    ];
    let m = MountGuard::foreground_source(Dirs::new(), &source, &args, Stdio::inherit());
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/secure"));
    sh(&format!("printf 'over\\ntls\\n' >> {mnt}/secure/0/append"));
    assert_eq!(sh(&format!("cat {mnt}/secure/0/by-offset/0")), "over\ntls\n");
    let info = sh(&format!("cat {mnt}/secure/0/info"));
    assert!(info.contains("log_end_offset: 2\n"), "{info}");
    m.unmount();

    // The proxy's certificate is not signed by this CA: exit 1, naming the broker and why.
    let addr = proxy.bootstrap().trim_start_matches("kafka://").to_string();
    let wrong = format!("ssl.ca.location={}", certs.path().join("other-ca.pem").display());
    let dirs = Dirs::new();
    let args = ["--config", "request.timeout.ms=5000", "--config", "security.protocol=SSL"];
    let (code, stderr) =
        failed_mount(&source, &dirs.mnt(), &[&args[..], &["--config", &wrong]].concat());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");

    // Plaintext to a TLS port is refused too, within the deadline, not a hang.
    let (code, stderr) =
        failed_mount(&source, &dirs.mnt(), &["--config", "request.timeout.ms=3000"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
}

#[test]
fn cluster_sasl_ssl_through_a_tls_proxy_authenticates_and_a_wrong_password_is_eacces() {
    let certs = tempfile::tempdir().unwrap();
    make_ca(certs.path(), "tls");
    let proxy_port = free_port();
    let mut broker = Tansu::start_full(Some(proxy_port), &[]);
    let url = format!("tcp://{}", broker.addr());
    broker.cli(&["user", "create", "--broker", &url, "--mechanism", "scram512", "carol", "pw-512"]);
    broker.restart_with(&["--authentication"]);
    let proxy = TlsProxy::start(
        proxy_port,
        &certs.path().join("tls-server.pem"),
        &certs.path().join("tls-server.key"),
        broker.port(),
    );
    let settings = |password: &str| {
        let mut c = ClientConfig::default();
        for s in [
            "request.timeout.ms=10000".to_string(),
            "security.protocol=SASL_SSL".to_string(),
            format!("ssl.ca.location={}", certs.path().join("tls-ca.pem").display()),
            "sasl.mechanism=SCRAM-SHA-512".to_string(),
            "sasl.username=carol".to_string(),
            format!("sasl.password={password}"),
        ] {
            c.set_pair(&s).unwrap();
        }
        c
    };
    let bootstrap = parse_bootstrap(&proxy.bootstrap()).unwrap();
    let c = Client::connect(bootstrap.clone(), settings("pw-512"))
        .unwrap_or_else(|e| panic!("{e}\n{}", broker.log()));
    c.create_topic("sasl-tls", 1, &[]).unwrap();
    let md = c.metadata().unwrap();
    assert!(md.topics.contains_key("sasl-tls"));
    let err = Client::connect(bootstrap, settings("wrong")).err().unwrap();
    assert_eq!(err.errno(), libc::EACCES, "{err}");
    assert!(err.to_string().contains(&format!("127.0.0.1:{proxy_port}")), "{err}");
}

#[test]
fn cluster_mutual_tls_mounts_with_the_client_certificate_and_fails_clearly_without_one() {
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path();
    make_ca(dir, "tls");
    make_ca(dir, "clients");
    make_client_cert(dir, "clients", "alice");
    make_client_cert(dir, "clients", "bob");
    // Signed by a CA the proxy does not trust for clients.
    make_client_cert(dir, "tls", "mallory");
    let proxy_port = free_port();
    let broker = Tansu::start_advertising(proxy_port);
    let proxy = TlsProxy::start_verifying(
        proxy_port,
        &dir.join("tls-server.pem"),
        &dir.join("tls-server.key"),
        broker.port(),
        Some(&dir.join("clients-ca.pem")),
    );
    let source = OsString::from(proxy.bootstrap());
    let addr = proxy.bootstrap().trim_start_matches("kafka://").to_string();
    let setting = |key: &str, file: &str| format!("{key}={}", dir.join(file).display());
    let ca = setting("ssl.ca.location", "tls-ca.pem");
    let cert = setting("ssl.certificate.location", "alice-client.pem");
    let key = setting("ssl.key.location", "alice-client.key");
    let tls = ["--config", "request.timeout.ms=10000", "--config", "security.protocol=SSL"];
    let with = |extra: &[&str]| -> Vec<String> {
        tls.iter().chain(["--config", &ca].iter()).chain(extra).map(|s| s.to_string()).collect()
    };

    // With the client certificate: mounts, appends, reads.
    let args = with(&["--config", &cert, "--config", &key]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let m = MountGuard::foreground_source(Dirs::new(), &source, &args, Stdio::inherit());
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/mutual"));
    sh(&format!("printf 'client\\ncertified\\n' >> {mnt}/mutual/0/append"));
    assert_eq!(sh(&format!("cat {mnt}/mutual/0/by-offset/0")), "client\ncertified\n");
    m.unmount();

    // Without one, the proxy refuses the handshake: exit 1 naming the broker.
    let dirs = Dirs::new();
    let args = with(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stderr) = failed_mount(&source, &dirs.mnt(), &args);
    eprintln!("without a client certificate: {stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
    assert!(stderr.contains("ssl.certificate.location"), "{stderr}");

    // A certificate the broker does not accept: exit 1 naming the broker.
    let other_cert = setting("ssl.certificate.location", "mallory-client.pem");
    let other_key = setting("ssl.key.location", "mallory-client.key");
    let args = with(&["--config", &other_cert, "--config", &other_key]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stderr) = failed_mount(&source, &dirs.mnt(), &args);
    eprintln!("an untrusted client certificate: {stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&addr) && stderr.contains("client certificate"), "{stderr}");

    // A key that is not the certificate's, an unreadable key, a file without a certificate:
    // exit 1 naming the file, before any broker is asked.
    let wrong_key = setting("ssl.key.location", "bob-client.key");
    let missing_key = setting("ssl.key.location", "nowhere.key");
    let no_cert = setting("ssl.certificate.location", "alice-client.key");
    for (extra, file) in [
        (["--config", &cert, "--config", &wrong_key], "bob-client.key"),
        (["--config", &cert, "--config", &missing_key], "nowhere.key"),
        (["--config", &no_cert, "--config", &key], "alice-client.key"),
    ] {
        let args = with(&extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = failed_mount(&source, &dirs.mnt(), &args);
        eprintln!("{file}: {stderr}");
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(&dir.join(file).display().to_string()), "{stderr}");
    }
}
