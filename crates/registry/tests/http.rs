//! HttpRegistry against a real HTTP server in the test (std TcpListener on 127.0.0.1, one thread
//! per connection, canned Schema Registry answers; rustls for https), which records every
//! request it gets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use topicfs_registry::{HttpRegistry, RegistryConfig};
use topicfs_schema::{SchemaReference, SchemaSource, SchemaType};
use topicfs_source::Error;

const ORDER_V1: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;

/// The canned registry: (status, body) for a path.
fn registry(path: &str) -> (u16, Vec<u8>) {
    let schema = |text: &str| serde_json::to_string(text).unwrap();
    let v1 =
        format!(r#"{{"subject":"orders-value","version":1,"id":1,"schema":{}}}"#, schema(ORDER_V1));
    let v2 = format!(
        r#"{{"subject":"orders-value","version":2,"id":2,"schemaType":"PROTOBUF","schema":{},"references":[{{"name":"common.proto","subject":"common","version":1}}]}}"#,
        schema("syntax = \"proto3\"; import \"common.proto\"; message Order { Common c = 1; }")
    );
    let not_found = |code: u32, what: &str| {
        (404, format!(r#"{{"error_code":{code},"message":"{what} not found"}}"#).into_bytes())
    };
    let ok = |body: String| (200, body.into_bytes());
    match path {
        "/schemas/ids/1" => ok(format!(r#"{{"schema":{}}}"#, schema(ORDER_V1))),
        "/schemas/ids/2" => ok(r#"{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";","references":[{"name":"common.proto","subject":"common","version":1}]}"#.to_string()),
        "/schemas/ids/7" => ok("{\"schema\": garbage".into()),
        "/schemas/ids/8" => (200, vec![b' '; 20 << 20]),
        "/schemas/ids/11" => (200, vec![b'['; 1 << 20]),
        "/schemas/ids/12" => (200, vec![0xff, 0xfe, 0x00, 0x80]),
        "/schemas/ids/13" => ok(r#"{"schema":"\"int\"","schemaType":7,"references":{}}"#.into()),
        "/schemas/ids/9" => {
            (500, br#"{"error_code":50001,"message":"Error in the backend"}"#.to_vec())
        }
        "/subjects" => ok(r#"["orders-value","common","a/b"]"#.into()),
        "/subjects/orders-value/versions" => ok("[2,1]".into()),
        "/subjects/orders-value/versions/1" => ok(v1),
        "/subjects/orders-value/versions/2" | "/subjects/orders-value/versions/latest" => ok(v2),
        "/subjects/a%2Fb/versions/latest" => {
            ok(r#"{"subject":"a/b","version":3,"id":5,"schemaType":"JSON","schema":"{}"}"#.into())
        }
        p if p.starts_with("/schemas/ids/") => not_found(40403, "Schema"),
        p if p.starts_with("/subjects/orders-value/versions/") => not_found(40402, "Version"),
        _ => not_found(40401, "Subject"),
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    accept: Option<String>,
    authorization: Option<String>,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.addr)
    }
    fn paths(&self) -> Vec<String> {
        self.seen.lock().unwrap().iter().map(|s| s.path.clone()).collect()
    }
    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

/// Serves `registry` (after checking `Authorization` against `auth` when given: 401 else)
/// over plain TCP, or TLS when `tls` is given.
fn serve(auth: Option<String>, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (auth, tls, log) = (auth.clone(), tls.clone(), log.clone());
            thread::spawn(move || match tls {
                Some(config) => {
                    let Ok(conn) = rustls::ServerConnection::new(config) else { return };
                    answer(rustls::StreamOwned::new(conn, stream), auth.as_deref(), &log)
                }
                None => answer(stream, auth.as_deref(), &log),
            });
        }
    });
    Server { addr, seen }
}

fn answer(mut stream: impl Read + Write, auth: Option<&str>, log: &Mutex<Vec<Seen>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next().unwrap_or("").split(' ').nth(1).unwrap_or("").to_string();
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let seen = Seen {
        path: path.clone(),
        accept: header("accept"),
        authorization: header("authorization"),
    };
    let authorized = auth.is_none_or(|a| seen.authorization.as_deref() == Some(a));
    log.lock().unwrap().push(seen);
    let (status, body) = if authorized {
        registry(&path)
    } else {
        (401, br#"{"error_code":401,"message":"Unauthorized"}"#.to_vec())
    };
    // /schemas/ids/10: 20 MiB without a length, the end of the answer being the end of the
    // connection (nothing tells the client its size before it has read it).
    let (status, body, length) = if path == "/schemas/ids/10" {
        (200, vec![b' '; 20 << 20], String::new())
    } else {
        let length = format!("Content-Length: {}\r\n", body.len());
        (status, body, length)
    };
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\n\
         {length}Connection: close\r\n\r\n"
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
    let _ = stream.flush();
}

fn client(settings: &[(&str, &str)]) -> HttpRegistry {
    let settings: Vec<(String, String)> =
        settings.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    HttpRegistry::new(RegistryConfig::from_settings(&settings).unwrap()).unwrap()
}

#[test]
fn schemas_by_id_subject_version_and_latest() {
    let server = serve(None, None);
    let url = server.url("http");
    let r = client(&[("schema.registry.url", &url)]);

    let s1 = r.by_id(1).unwrap();
    assert_eq!((s1.id, s1.schema_type, s1.text.as_str()), (1, SchemaType::Avro, ORDER_V1));
    assert_eq!(s1.subject, None);

    let s2 = r.by_id(2).unwrap();
    assert_eq!(s2.schema_type, SchemaType::Protobuf);
    let common =
        SchemaReference { name: "common.proto".into(), subject: "common".into(), version: 1 };
    assert_eq!(s2.references, vec![common.clone()]);

    let v1 = r.by_subject("orders-value", Some(1)).unwrap();
    assert_eq!((v1.id, v1.subject.as_deref(), v1.version), (1, Some("orders-value"), Some(1)));
    let latest = r.by_subject("orders-value", None).unwrap();
    assert_eq!((latest.id, latest.version), (2, Some(2)));
    assert_eq!(latest.references, vec![common]);

    // The subject is one percent-encoded path segment.
    let ab = r.by_subject("a/b", None).unwrap();
    assert_eq!((ab.id, ab.schema_type), (5, SchemaType::Json));

    assert_eq!(r.subjects().unwrap(), vec!["a/b", "common", "orders-value"]);
    assert_eq!(r.versions("orders-value").unwrap(), vec![(1, 1), (2, 2)]);

    let seen = server.seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|s| s.accept.as_deref() == Some("application/vnd.schemaregistry.v1+json"))
    );
    assert!(seen.iter().all(|s| s.authorization.is_none()));
    assert!(server.paths().contains(&"/subjects/a%2Fb/versions/latest".to_string()));
}

#[test]
fn not_found_answers_are_not_found() {
    let server = serve(None, None);
    let r = client(&[("schema.registry.url", &server.url("http"))]);
    for e in [
        r.by_id(404).unwrap_err(),
        r.by_subject("nope", None).unwrap_err(),
        r.by_subject("orders-value", Some(9)).unwrap_err(),
        r.versions("nope").unwrap_err(),
    ] {
        assert!(matches!(e, Error::NotFound(_)), "{e:?}");
        assert!(e.to_string().contains(&server.url("http")), "{e}");
        assert!(e.to_string().contains("not found (error 404"), "{e}");
    }
}

#[test]
fn caches_ids_for_good_and_the_rest_for_the_ttl() {
    let server = serve(None, None);
    let r = client(&[
        ("schema.registry.url", &server.url("http")),
        ("schema.registry.cache.ttl.ms", "1500"),
    ]);
    r.by_id(1).unwrap();
    r.by_id(1).unwrap();
    r.subjects().unwrap();
    r.subjects().unwrap();
    r.by_subject("orders-value", None).unwrap();
    r.by_subject("orders-value", None).unwrap();
    assert!(matches!(r.by_id(404), Err(Error::NotFound(_))));
    assert!(matches!(r.by_id(404), Err(Error::NotFound(_))));
    assert_eq!(
        server.paths(),
        [
            "/schemas/ids/1",
            "/subjects",
            "/subjects/orders-value/versions/latest",
            "/schemas/ids/404"
        ]
    );
    assert_eq!(r.requests(), 4);

    thread::sleep(Duration::from_millis(1600));
    r.by_id(1).unwrap();
    assert_eq!(server.count(), 4, "a schema by id is never asked for again");
    r.subjects().unwrap();
    r.by_subject("orders-value", None).unwrap();
    assert!(matches!(r.by_id(404), Err(Error::NotFound(_))));
    assert_eq!(server.count(), 7, "{:?}", server.paths());
}

#[test]
fn basic_auth_accepted_and_refused() {
    let token = base64::engine::general_purpose::STANDARD.encode("fred:s3cret");
    let server = serve(Some(format!("Basic {token}")), None);
    let url = server.url("http");

    let r = client(&[("schema.registry.url", &url), ("basic.auth.user.info", "fred:s3cret")]);
    assert_eq!(r.by_id(1).unwrap().id, 1);
    let with_url = format!("http://fred:s3cret@{}", server.addr);
    let r = client(&[("schema.registry.url", &with_url), ("basic.auth.credentials.source", "URL")]);
    assert_eq!(r.by_id(1).unwrap().id, 1);

    let r = client(&[("schema.registry.url", &url), ("basic.auth.user.info", "fred:wrong")]);
    let e = r.by_id(1).unwrap_err();
    assert!(matches!(e, Error::AuthFailed { .. }), "{e:?}");
    assert!(e.to_string().contains(&url) && e.to_string().contains("401"), "{e}");
    let r = client(&[("schema.registry.url", &url)]);
    assert!(matches!(r.by_id(1), Err(Error::AuthFailed { .. })));
    // The default source is the URL's user info; the password is never shown.
    let wrong_url = format!("http://fred:wr0ng-pass@{}", server.addr);
    let r = client(&[("schema.registry.url", &wrong_url)]);
    let e = r.by_id(2).unwrap_err();
    assert!(matches!(e, Error::AuthFailed { .. }), "{e:?}");
    assert!(!format!("{e} {e:?} {r:?}").contains("wr0ng-pass"), "{e} {e:?} {r:?}");
}

#[test]
fn a_silent_registry_is_a_timeout_naming_the_url() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            keep.lock().unwrap().push(stream);
        }
    });
    let url = format!("http://{addr}");
    let r = client(&[
        ("schema.registry.url", &url),
        ("schema.registry.request.timeout.ms", "300"),
        ("schema.registry.down.ms", "1000"),
    ]);
    let started = Instant::now();
    let e = r.by_id(1).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(matches!(e, Error::Timeout { after_ms: 300, .. }), "{e:?}");
    assert!(e.to_string().contains("schema.registry.request.timeout.ms"), "{e}");
    assert!(e.to_string().contains(&url), "{e}");
    assert_eq!(held.lock().unwrap().len(), 1);

    // Down for schema.registry.down.ms: the next requests are not sent (no record waits out
    // another deadline), then it is asked again.
    let e = r.by_id(2).unwrap_err();
    assert!(matches!(e, Error::Timeout { after_ms: 300, .. }), "{e:?}");
    assert!(
        e.to_string().contains("schema.registry.down.ms") && e.to_string().contains(&url),
        "{e}"
    );
    assert_eq!((held.lock().unwrap().len(), r.requests()), (1, 1));
    thread::sleep(Duration::from_millis(1100));
    assert!(matches!(r.by_id(3), Err(Error::Timeout { .. })));
    assert_eq!(r.requests(), 2);
}

#[test]
fn a_registry_that_drips_its_answer_is_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{\"schema\":\"";
                let _ = stream.write_all(head.as_bytes());
                while stream.write_all(b"x").and_then(|()| stream.flush()).is_ok() {
                    thread::sleep(Duration::from_millis(20));
                }
            });
        }
    });
    let r = client(&[
        ("schema.registry.url", &format!("http://{addr}")),
        ("schema.registry.request.timeout.ms", "300"),
    ]);
    let started = Instant::now();
    let e = r.by_id(1).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("schema.registry.request.timeout.ms"), "{e}");
}

#[test]
fn one_client_serves_many_threads() {
    let server = serve(None, None);
    let r = Arc::new(client(&[("schema.registry.url", &server.url("http"))]));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let r = r.clone();
            thread::spawn(move || {
                for _ in 0..20 {
                    assert_eq!(r.by_id(1 + i % 2).unwrap().id, 1 + i % 2);
                    assert_eq!(r.versions("orders-value").unwrap(), vec![(1, 1), (2, 2)]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Each answer is fetched a few times at most (threads racing on a miss), not per call.
    // (Without the caches: 8 x 20 x 4 = 640 requests.)
    assert!(server.count() <= 80, "{}", server.count());
}

fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_refused_connection_names_the_url_and_the_next_url_is_tried() {
    let port = dead_port();
    let dead = format!("http://127.0.0.1:{port}");
    let r = client(&[("schema.registry.url", &dead)]);
    let e = r.by_id(1).unwrap_err();
    assert!(matches!(e, Error::BrokerUnreachable { .. }), "{e:?}");
    assert!(e.to_string().contains(&dead), "{e}");
    let e = r.by_id(1).unwrap_err();
    assert!(matches!(e, Error::BrokerUnreachable { .. }), "{e:?}");
    assert!(e.to_string().contains("counts as down") && e.to_string().contains(&dead), "{e}");
    assert_eq!(r.requests(), 1);

    let server = serve(None, None);
    let both = format!("{dead},{}", server.url("http"));
    let r = client(&[("schema.registry.url", &both)]);
    assert_eq!(r.by_id(1).unwrap().id, 1);
    assert_eq!(r.requests(), 2);
    // The URL that answered is asked first from then on.
    assert_eq!(r.by_id(2).unwrap().id, 2);
    assert_eq!(r.requests(), 3);
}

#[test]
fn hostile_answers_are_errors() {
    let server = serve(None, None);
    let url = server.url("http");
    let r = client(&[("schema.registry.url", &url)]);
    let e = r.by_id(8).unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
    assert!(e.to_string().contains("over 16777216 bytes"), "{e}");
    let e = r.by_id(10).unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
    assert!(e.to_string().contains("over 16777216 bytes"), "{e}");
    for id in [11, 12, 13] {
        let e = r.by_id(id).unwrap_err();
        assert!(matches!(e, Error::Protocol { .. }), "{id}: {e:?}");
        assert!(e.to_string().contains(&format!("/schemas/ids/{id}")), "{e}");
    }
    let e = r.by_id(7).unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
    assert!(e.to_string().contains("not JSON") && e.to_string().contains(&url), "{e}");
    let e = r.by_id(9).unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
    assert!(e.to_string().contains("500") && e.to_string().contains("Error in the backend"), "{e}");
}

// ---- TLS ----

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, signed by it.
fn make_pki(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=topicfs test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
    for (name, ext) in [
        (
            "server",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, pem, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        let mut req = vec!["req"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=127.0.0.1"]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &extfile,
            ],
        );
    }
}

fn tls_server_config(dir: &Path, require_client_cert: bool) -> Arc<rustls::ServerConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client_cert {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    Arc::new(builder.with_single_cert(certs, key).unwrap())
}

fn path_str(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

#[test]
fn tls_with_the_ca_file_and_not_without_it() {
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let server = serve(None, Some(tls_server_config(dir.path(), false)));
    let url = server.url("https");
    let ca = path_str(dir.path(), "ca.pem");

    let r = client(&[("schema.registry.url", &url), ("schema.registry.ssl.ca.location", &ca)]);
    assert_eq!(r.by_id(1).unwrap().text, ORDER_V1);

    // The system's roots do not know the test CA.
    let settings = vec![("schema.registry.url".to_string(), url.clone())];
    match HttpRegistry::new(RegistryConfig::from_settings(&settings).unwrap()) {
        Ok(r) => {
            let e = r.by_id(1).unwrap_err();
            assert!(matches!(e, Error::AuthFailed { .. }), "{e:?}");
            assert!(e.to_string().contains(&url), "{e}");
        }
        // No system bundle on this machine: refused up front, naming it.
        Err(e) => assert!(e.to_string().contains("CA bundle"), "{e}"),
    }
    // A CA file without a certificate is refused up front.
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let settings = vec![
        ("schema.registry.url".to_string(), url.clone()),
        ("schema.registry.ssl.ca.location".to_string(), path_str(dir.path(), "empty.pem")),
    ];
    let e = HttpRegistry::new(RegistryConfig::from_settings(&settings).unwrap()).unwrap_err();
    assert!(e.to_string().contains("schema.registry.ssl.ca.location"), "{e}");
}

#[test]
fn tls_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let server = serve(None, Some(tls_server_config(dir.path(), true)));
    let url = server.url("https");
    let ca = path_str(dir.path(), "ca.pem");
    let (cert, key) = (path_str(dir.path(), "client.pem"), path_str(dir.path(), "client.key"));

    let r = client(&[
        ("schema.registry.url", &url),
        ("schema.registry.ssl.ca.location", &ca),
        ("schema.registry.ssl.certificate.location", &cert),
        ("schema.registry.ssl.key.location", &key),
    ]);
    assert_eq!(r.by_id(1).unwrap().id, 1);

    let r = client(&[("schema.registry.url", &url), ("schema.registry.ssl.ca.location", &ca)]);
    let e = r.by_id(1).unwrap_err();
    assert!(matches!(e, Error::AuthFailed { .. }), "{e:?}");
    assert!(e.to_string().contains(&url), "{e}");
    assert_eq!(server.paths(), ["/schemas/ids/1"], "no request got through without a certificate");
}
