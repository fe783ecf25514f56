//! A real OCI registry for the tests: Debian's `docker-registry` (CNCF
//! distribution 2.8), started on 127.0.0.1 with its own configuration, port
//! and storage under a temporary directory (never the packaged service),
//! optionally with TLS from a throwaway CA and htpasswd authentication, and
//! stopped by the PID it was started with.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REGISTRY: &str = "/usr/bin/docker-registry";

/// One line of an htpasswd file, as docker-registry reads it (bcrypt only).
pub fn htpasswd_line(user: &str, password: &str) -> String {
    let hash = bcrypt::hash(password, 5).expect("bcrypt");
    format!("{user}:{hash}\n")
}

/// A running registry.
pub struct TestRegistry {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The CA that signed its certificate, when it speaks TLS.
    pub ca: Option<PathBuf>,
    /// The user and password it asks for, when it does.
    pub login: Option<(String, String)>,
}

/// How a registry is set up.
#[derive(Default)]
pub struct Options {
    pub tls: bool,
    pub login: Option<(String, String)>,
    /// What is wrong with its certificate, if anything (with `tls`).
    pub certificate: Certificate,
}

/// The registry's certificate, signed by the test CA.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Certificate {
    /// For 127.0.0.1, valid for two days.
    #[default]
    Valid,
    /// For 127.0.0.2 only: not the address the clients use.
    OtherName,
    /// For 127.0.0.1, expired a day ago.
    Expired,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, and a certificate it signed (for 127.0.0.1, unless `certificate`
/// says otherwise).
fn make_certificates(dir: &Path, certificate: Certificate) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
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
        "/CN=policy-host test CA",
    ]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("server.ext"),
        format!(
            "subjectAltName=IP:{}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
            if certificate == Certificate::OtherName { "127.0.0.2" } else { "127.0.0.1" }
        ),
    )
    .unwrap();
    // A negative validity ends before it begins: expired as soon as it is made.
    let days = if certificate == Certificate::Expired {
        "-1"
    } else {
        "2"
    };
    openssl(
        dir,
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
            "-out",
            "server.pem",
            "-days",
            days,
            "-extfile",
            "server.ext",
        ],
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl TestRegistry {
    /// Starts a registry. Panics when `docker-registry` is not installed:
    /// the tests that need one say `requires = "docker-registry"`.
    pub fn start(options: Options) -> Self {
        assert!(
            Path::new(REGISTRY).is_file(),
            "this test needs docker-registry (apt-get install docker-registry)"
        );
        let dir = tempfile::Builder::new()
            .prefix("policy-host-registry-")
            .tempdir()
            .expect("a registry directory");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            dir.path().join("data").display()
        );
        let mut ca = None;
        if options.tls {
            make_certificates(dir.path(), options.certificate);
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                dir.path().join("server.pem").display(),
                dir.path().join("server.key").display()
            ));
            ca = Some(dir.path().join("ca.pem"));
        }
        if let Some((user, password)) = &options.login {
            std::fs::write(dir.path().join("htpasswd"), htpasswd_line(user, password)).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: policy-host-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(REGISTRY)
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let registry = Self {
            child: Some(child),
            dir,
            addr,
            ca,
            login: options.login,
        };
        registry.wait_until_listening();
        registry
    }

    fn wait_until_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&self.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "docker-registry did not listen on {} within 20 s:\n{}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `oci://ADDR/PATH`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.addr)
    }

    /// The registry's own log (its access log included).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The requests in the access log whose request line contains `needle`
    /// (e.g. `"GET /v2/policies/web/manifests/"`).
    pub fn requests(&self, needle: &str) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains("\"GET ") || l.contains("\"PUT ") || l.contains("\"HEAD "))
            .filter(|l| l.contains(needle))
            .count()
    }

    /// The file holding blob `digest` (`sha256:...`) in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Stops the registry (by the PID it was started with).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A Docker `config.json` directory holding this registry's login, for
    /// `DOCKER_CONFIG`.
    pub fn docker_config(&self) -> PathBuf {
        let dir = self.dir.path().join("docker");
        std::fs::create_dir_all(&dir).unwrap();
        let (user, password) = self.login.clone().expect("a registry with a login");
        let auth = base64(format!("{user}:{password}").as_bytes());
        std::fs::write(
            dir.join("config.json"),
            format!(
                "{{\"auths\":{{\"{}\":{{\"auth\":\"{auth}\"}}}}}}",
                self.addr
            ),
        )
        .unwrap();
        dir
    }

    /// One plain-HTTP request to the registry (no TLS, no login): for what
    /// `host push` would never send, such as a two-layer manifest. Returns
    /// the status code and the body.
    pub fn http(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.addr).expect("connect to the registry");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: {content_type}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP response");
        let head = String::from_utf8_lossy(&response[..split]).into_owned();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status code");
        let mut body = response[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        (status, body)
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = body.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&body[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[end + 2 + size + 2..];
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(super::base64(b"ops:s3cret"), "b3BzOnMzY3JldA==");
        assert_eq!(super::base64(b"abc"), "YWJj");
        assert_eq!(super::base64(b"ab"), "YWI=");
    }
}
