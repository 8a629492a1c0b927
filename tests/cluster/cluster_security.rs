//! SASL of the cluster client against tansu: SCRAM users created through the broker, wrong
//! passwords refused as authentication failures (EACCES) naming the broker.
//!
//! TLS is not tested against a broker: tansu 0.6's command line refuses `--cert` together with
//! `--key` (a clap group makes them exclusive), so it cannot serve TLS (doc/cluster-brokers.md).
//! `make_ca` stays for the TLS test a broker that can will get.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::tansu::Tansu;
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

#[allow(dead_code)]
/// A CA (`NAME-ca.pem`) and a server certificate for 127.0.0.1 signed by it
/// (`NAME-server.pem`, `NAME-server.key`).
fn make_ca(dir: &Path, name: &str) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let (ca_key, ca) = (format!("{name}-ca.key"), format!("{name}-ca.pem"));
    let mut args = vec!["req", "-x509"];
    args.extend(ec);
    args.extend(["-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj", "/CN=topicfs test CA"]);
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
