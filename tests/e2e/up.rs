//! `cachelens up`, the README's first command, run as a new user would: the real binary on a
//! fresh home (its default database a temp file), serving on loopback.

use crate::common::{bin, corpus_read_only, fresh_db_at_blocking, untouched};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `cachelens ARGS` on a fresh home under `t`: the default database is `t/data/cachelens/`, and
/// every default cache location points to a dir that does not exist.
fn on_fresh_home(t: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env("HOME", t.join("home"))
        .env("XDG_DATA_HOME", t.join("data"))
        .env("TRITON_CACHE_DIR", t.join("none/triton"))
        .env("TORCHINDUCTOR_CACHE_DIR", t.join("none/inductor"))
        .env("VLLM_CACHE_ROOT", t.join("none/vllm"))
        .env_remove("TRITON_HOME")
        .env_remove("CACHELENS_DB")
        .env_remove("CACHELENS_LISTEN")
        .env_remove("CACHELENS_SERVER");
    cmd
}

fn data_dir(t: &Path) -> PathBuf {
    t.join("data").join("cachelens")
}

/// An `up` child process, killed when dropped.
struct Up(std::process::Child);
impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` and read its stderr up to the line that says where it serves: (child, URL, the
/// lines before it). Panics with those lines when it exits first.
fn start(mut cmd: Command) -> (Up, String, Vec<String>) {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let up = Up(child);
    let mut lines = vec![];
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if let Some(at) = line.find("on http://") {
            let url = line[at + 3..].trim().to_string();
            lines.push(line);
            return (up, url, lines);
        }
        lines.push(line);
    }
    panic!("up ended without serving:\n{}", lines.join("\n"));
}

/// GET `url` (`http://HOST:PORT/PATH`) over a plain HTTP/1.0 connection: its JSON body.
fn get_json(url: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "GET {url}: {head}\n{body}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {url}: {e}: {body}"))
}

fn machine_names(url: &str) -> Vec<String> {
    let v = get_json(&format!("{url}/api/v1/machines"));
    let list = v.as_array().or_else(|| v["machines"].as_array()).unwrap_or_else(|| panic!("{v}"));
    list.iter().map(|m| m["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn up_serves_the_data_already_in_the_default_database() {
    let t = tempfile::TempDir::new().unwrap();
    let cache = corpus_read_only("h100-jit-3.6.0").join("triton-cache");
    let out =
        on_fresh_home(t.path(), &["scan", "--quiet", "--machine", "h100-a", cache.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let db = data_dir(t.path()).join("cachelens.db");
    assert!(db.is_file(), "scan wrote no default database at {}", db.display());

    let (_up, url, lines) = start(on_fresh_home(t.path(), &["up", "--listen", "127.0.0.1:0"]));
    let said = lines.join("\n");
    assert!(!said.contains("demo"), "up loaded the demo over a database with data:\n{said}");
    assert!(
        said.contains(&format!("serving the 1 machine already scanned into {}", db.display())),
        "up did not say it serves the default database's data:\n{said}"
    );
    assert_eq!(machine_names(&url), ["h100-a"]);
    assert!(!data_dir(t.path()).join("demo.db").exists(), "a demo database was made");
}

#[test]
fn up_on_a_busy_port_says_so_before_loading_the_demo() {
    let t = tempfile::TempDir::new().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let out = on_fresh_home(t.path(), &["up", "--listen", &addr.to_string()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("port {} is in use", addr.port())) && err.contains("--listen 127.0.0.1:PORT"),
        "the error does not name the port and how to choose another:\n{err}"
    );
    assert!(!err.contains("demo:"), "the demo was loaded before the port was tried:\n{err}");
    let data = data_dir(t.path());
    assert!(!data.join("demo.db").exists() && !data.join("demo.demo-caches").exists(), "the demo was written");
    drop(busy);
}

#[test]
fn serve_demo_on_a_busy_port_fails_before_loading() {
    let t = tempfile::TempDir::new().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let (_db, db) = fresh_db_at_blocking();
    let out =
        on_fresh_home(t.path(), &["serve", "--demo", "--db", db.to_str().unwrap(), "--listen", &addr.to_string()])
            .output()
            .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("port {} is in use", addr.port())), "{err}");
    let untouched = tokio::runtime::Runtime::new().unwrap().block_on(untouched(&db));
    assert!(untouched, "the demo database was written before the port was tried");
}

/// Bytes of the regular files under `dir`, symlinks not followed.
fn du(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                du(&e.path())
            } else if t.is_file() {
                e.metadata().unwrap().len()
            } else {
                0
            }
        })
        .sum()
}

#[test]
fn up_with_nothing_loads_the_demo_and_says_where_and_how_much() {
    let t = tempfile::TempDir::new().unwrap();
    let (_up, url, lines) = start(on_fresh_home(t.path(), &["up", "--listen", "127.0.0.1:0"]));
    let said = lines.join("\n");
    let data = data_dir(t.path());
    let (db, caches) = (data.join("demo.db"), data.join("demo.demo-caches"));
    let before = lines
        .iter()
        .find(|l| l.starts_with("demo: unpacking"))
        .unwrap_or_else(|| panic!("no line before loading:\n{said}"));
    assert!(before.contains(&caches.display().to_string()) && before.contains(&db.display().to_string()), "{before}");
    let after = lines
        .iter()
        .find(|l| l.starts_with("demo: loaded"))
        .unwrap_or_else(|| panic!("no line after loading:\n{said}"));
    // the bytes said are the bytes on disk
    let bytes = du(&caches);
    assert!(bytes > 1 << 20, "{bytes} bytes of demo caches");
    assert!(
        after.contains(&format!("({bytes} bytes) of caches in {}", caches.display())),
        "{after} (on disk: {bytes})"
    );
    assert!(after.contains(&format!("database {}", db.display())), "{after}");
    let names = machine_names(&url);
    assert!(names.iter().any(|n| n == "mi300-1") && names.iter().any(|n| n == "h100-hook"), "{names:?}");
    assert!(!data.join("cachelens.db").exists(), "the demo went into the default database");
}
