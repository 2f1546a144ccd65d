//! A read-only image registry on 127.0.0.1 serving a containerd's own content store, for what
//! must pull an image the test containerd already has (containerd 2.1's CRI restore pulls the
//! checkpoint's base image by its repo digest before it looks for it locally). It answers the
//! distribution API's manifest and blob requests (GET and HEAD) by digest from the store's blob
//! directory; anything else is 404. containerd's resolver talks plain HTTP to a loopback host.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct Registry {
    port: u16,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
}

impl Registry {
    /// Serves the blobs under `blobs` (`<content root>/blobs`, holding `sha256/<hex>`), manifests
    /// with the media type `manifest_type`.
    pub fn serve(blobs: &Path, manifest_type: &str) -> Registry {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap_or_else(|e| panic!("bind 127.0.0.1:0: {e}"));
        let port = listener.local_addr().expect("bound address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let (blobs, manifest_type, stopping) = (blobs.to_path_buf(), manifest_type.to_string(), Arc::clone(&stop));
        let server = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    let _ = answer(conn, &blobs, &manifest_type);
                }
            }
        });
        Registry { port, stop, server: Some(server) }
    }

    /// `127.0.0.1:PORT`, the registry host of the image names it serves.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept so that the server sees the stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

/// Answers one request and closes the connection.
fn answer(conn: TcpStream, blobs: &Path, manifest_type: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
    }
    let mut words = request.split_whitespace();
    let (method, path) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let head = method == "HEAD";
    match route(path, blobs, manifest_type) {
        Some((file, content_type, digest)) => match std::fs::read(&file) {
            Ok(body) => respond(conn, "200 OK", content_type, Some(digest), &body, head),
            Err(_) => respond(conn, "404 Not Found", "text/plain", None, b"", head),
        },
        None if path == "/v2/" || path == "/v2" => respond(conn, "200 OK", "application/json", None, b"{}", head),
        None => respond(conn, "404 Not Found", "text/plain", None, b"", head),
    }
}

/// The blob file a `/v2/<name>/manifests/<digest>` or `/v2/<name>/blobs/<digest>` path names,
/// its content type and digest; None for any other path (tags included).
fn route<'a>(path: &'a str, blobs: &Path, manifest_type: &'a str) -> Option<(PathBuf, &'a str, &'a str)> {
    let rest = path.strip_prefix("/v2/")?;
    let (kind, digest) = rest.rsplit_once('/').and_then(|(before, digest)| Some((before.rsplit_once('/')?.1, digest)))?;
    let hex = digest.strip_prefix("sha256:")?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let content_type = match kind {
        "manifests" => manifest_type,
        "blobs" => "application/octet-stream",
        _ => return None,
    };
    Some((blobs.join("sha256").join(hex), content_type, digest))
}

fn respond(mut conn: TcpStream, status: &str, content_type: &str, digest: Option<&str>, body: &[u8], head: bool) -> std::io::Result<()> {
    let digest = digest.map(|d| format!("Docker-Content-Digest: {d}\r\n")).unwrap_or_default();
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{digest}Connection: close\r\n\r\n",
        body.len()
    )?;
    if !head {
        conn.write_all(body)?;
    }
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::route;
    use std::path::Path;

    #[test]
    fn only_manifests_and_blobs_by_sha256_digest_are_served() {
        let hex = "a".repeat(64);
        let blobs = Path::new("/b");
        let (path, digest) = (format!("/v2/busybox/manifests/sha256:{hex}"), format!("sha256:{hex}"));
        let (file, typ, served) = route(&path, blobs, "m").expect("a manifest");
        assert_eq!((file, typ, served), (blobs.join("sha256").join(&hex), "m", digest.as_str()));
        assert!(route(&format!("/v2/library/busybox/blobs/sha256:{hex}"), blobs, "m").is_some());
        assert!(route("/v2/busybox/manifests/latest", blobs, "m").is_none(), "no tags");
        assert!(route("/v2/busybox/manifests/sha256:../../etc/passwd", blobs, "m").is_none());
        assert!(route(&format!("/v2/busybox/tags/sha256:{hex}"), blobs, "m").is_none());
    }
}
