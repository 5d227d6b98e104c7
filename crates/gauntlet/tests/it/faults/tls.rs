//! An attached server behind HTTPS: its certificate authority from `ca_file`, extra headers from environment
//! variables (secrets, never written), and a certificate nobody vouches for refused.
//!
//! TLS is terminated by a small Python forwarder (the standard library's `ssl`) in front of the fake server; the
//! certificates are made by `openssl` for the test.

use std::io::BufRead;
use std::process::{Command, Stdio};

use super::*;

/// Terminates TLS with CERT/KEY and forwards each connection to 127.0.0.1:PORT, appending what the client sent to
/// LOG. Prints its port, then serves until killed (or for 120 s at most).
const FORWARDER: &str = r#"
import signal, socket, ssl, sys, threading
signal.alarm(120)
cert, key, port, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
print(ls.getsockname()[1], flush=True)
lock = threading.Lock()
def pipe(a, b, logged):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            if logged:
                with lock, open(log, "ab") as f:
                    f.write(d)
            b.sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(c):
    try:
        t = ctx.wrap_socket(c, server_side=True)
    except (ssl.SSLError, OSError):
        c.close()
        return
    u = socket.create_connection(("127.0.0.1", port))
    threading.Thread(target=pipe, args=(t, u, True), daemon=True).start()
    pipe(u, t, False)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn https_server_with_its_ca_file_and_secret_headers_from_the_environment() {
    let f = Fixture::new("tls");
    let server = Reaped(f.attached(&[], "", "UNUSED_KEY").0);
    let dir = f.path().to_owned();
    // `openssl req` asks for a subject unless given one.
    for (args, subject) in [
        (
            &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2"][..],
            "/CN=gauntlet test CA",
        ),
        (&["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr"][..], "/CN=127.0.0.1"),
    ] {
        let mut a = args.to_vec();
        a.extend_from_slice(&["-subj", subject]);
        openssl(&dir, &a);
    }
    std::fs::write(dir.join("ext.cnf"), "subjectAltName = IP:127.0.0.1\n").unwrap();
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.pem",
        ],
    );
    // The fake server's port is in the manifest `attached` wrote.
    let plain = std::fs::read_to_string(dir.join("attach.toml")).unwrap();
    let port: u16 = plain.split("127.0.0.1:").nth(1).unwrap().split(['"', '/']).next().unwrap().parse().unwrap();
    let log = dir.join("requests.log");
    let mut child = Command::new("python3")
        .args(["-c", FORWARDER, "server.pem", "server.key", &port.to_string(), log.to_str().unwrap()])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let stdout = child.stdout.take().unwrap();
    let forwarder = Reaped(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let tls_port: u16 =
        rx.recv_timeout(Duration::from_secs(20)).expect("the forwarder says its port").trim().parse().unwrap();

    let manifest = |extra: &str| {
        let path = dir.join("tls.toml");
        std::fs::write(
            &path,
            format!(
                "version = 1\n[profiles.remote]\nbase_url = \"https://127.0.0.1:{tls_port}\"\nsuite = \"suite.toml\"\n\
                 load_timeout = \"4s\"\nrequest_timeout = \"5s\"\nheaders_env = {{ \"X-Org-Token\" = \"ORG_TOKEN\" }}\n{extra}"
            ),
        )
        .unwrap();
        path
    };
    let secret = "org-3f9c-secret";
    let run_with = |path: &Path, out: &str, env: &[(&str, &str)]| {
        let out = dir.join(out);
        let args = ["run", "--manifest", path.to_str().unwrap(), "--out", out.to_str().unwrap()];
        finish(gauntlet(&args, env, Duration::from_secs(60)), &out)
    };

    // Trusted through ca_file: the suite runs over TLS and every request carries the header.
    let trusted = manifest("ca_file = \"ca.pem\"\n");
    let run = run_with(&trusted, "ok", &[("ORG_TOKEN", secret)]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.case("alpha")["status"], "pass", "{}", run.explain());
    let sent = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).to_ascii_lowercase();
    assert!(sent.contains(&format!("x-org-token: {secret}")), "the header went out over TLS");
    let mut written = run.stdout.clone() + &run.stderr;
    for entry in std::fs::read_dir(&run.out).unwrap().flatten() {
        if entry.path().is_file() {
            written += &String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap());
        }
    }
    assert!(!written.contains(secret), "a header's value is never written");

    // Without the variable: bad input, naming the variable, before anything is sent.
    let unset = run_with(&trusted, "unset", &[]);
    assert_eq!(unset.code, 2, "{}", unset.explain());
    assert!(unset.stderr.contains("variable `ORG_TOKEN` is not set"), "{}", unset.explain());
    // A CA file that holds no certificate: bad input.
    std::fs::write(dir.join("junk.pem"), "not a certificate\n").unwrap();
    let junk = run_with(&manifest("ca_file = \"junk.pem\"\n"), "junk", &[("ORG_TOKEN", secret)]);
    assert_eq!(junk.code, 2, "{}", junk.explain());
    assert!(junk.stderr.contains("PEM"), "{}", junk.explain());
    // No ca_file: the system does not know this authority, so the server is never reached.
    let untrusted = run_with(&manifest(""), "untrusted", &[("ORG_TOKEN", secret)]);
    assert_eq!(untrusted.code, 1, "{}", untrusted.explain());
    assert!(untrusted.explain().to_lowercase().contains("certificate"), "{}", untrusted.explain());

    drop((forwarder, server));
    assert_no_survivors(&f.tag);
}
