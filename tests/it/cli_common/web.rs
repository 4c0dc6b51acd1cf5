//! Shared by the web tests: a `kernbench web` server for the test's
//! lifetime, a plain HTTP request, and headless Chromium.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `kernbench web --port 0` with more flags, killed when dropped (the test
/// passing or not).
pub struct WebServer {
    child: Child,
    /// `http://127.0.0.1:PORT/`, from its first line.
    pub url: String,
}

impl WebServer {
    /// Starts `kernbench <before...> web --port 0 <after...>` and reads the
    /// URL it listens on.
    pub fn start(before: &[&str], after: &[&str]) -> WebServer {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kernbench"));
        command
            .args(before)
            .args(["web", "--port", "0"])
            .args(after);
        WebServer::spawn(command)
    }

    /// [`WebServer::start`] under `ulimit -v KIB` (an address-space cap).
    pub fn start_capped(kib: u64, after: &[&str]) -> WebServer {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_kernbench"))
            .args(["web", "--port", "0"])
            .args(after);
        WebServer::spawn(command)
    }

    fn spawn(mut command: Command) -> WebServer {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("kernbench starts");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the first line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first line `{line}` is `listening on URL`"))
            .to_owned();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with('/'),
            "{url}"
        );
        WebServer { child, url }
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches('/')
    }

    /// The server's thread count (Linux's `/proc`).
    pub fn threads(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("a Threads: line")
    }

    /// `GET /path` answered whole within `bound` (the test fails past
    /// it), and how long it took.
    pub fn get_within(&self, path: &str, bound: Duration) -> (String, Duration) {
        let start = Instant::now();
        let mut stream = self.request(path);
        stream
            .set_read_timeout(Some(bound))
            .expect("a read timeout");
        let mut reply = String::new();
        std::io::Read::read_to_string(&mut stream, &mut reply)
            .unwrap_or_else(|e| panic!("GET /{path} not answered within {bound:?}: {e}"));
        (reply, start.elapsed())
    }

    /// An HTTP/1.0 `GET /path`, the response left to read.
    pub fn request(&self, path: &str) -> TcpStream {
        let host = self.host();
        let mut stream = TcpStream::connect(host).expect("the server accepts");
        write!(stream, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("request sent");
        stream
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Chromium binary on `PATH`, if any.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// `target/`, where screenshots are left to look at.
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp is under target/")
        .to_path_buf()
}

/// Runs headless Chromium on `url` with `args` and the profile folder
/// `profile` (under target/tmp), at most 90 s. Its output goes to files,
/// not pipes: a page larger than a pipe's buffer would block Chromium on
/// its write while this waits for it to exit.
pub fn browse(chromium: &Path, profile: &str, args: &[&str], url: &str) -> Output {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out_path = dir.join(format!("{profile}.out"));
    let err_path = dir.join(format!("{profile}.err"));
    let mut child = Command::new(chromium)
        .args(["--headless", "--disable-gpu", "--no-sandbox"])
        .args(["--disable-background-networking", "--no-first-run"])
        .arg(format!("--user-data-dir={}", dir.join(profile).display()))
        .args(args)
        .arg(url)
        .stdout(std::fs::File::create(&out_path).expect("a file for stdout"))
        .stderr(std::fs::File::create(&err_path).expect("a file for stderr"))
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("chromium runs") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 90 s on {url}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).expect("chromium's stdout"),
        stderr: std::fs::read(&err_path).expect("chromium's stderr"),
    }
}

/// A PNG screenshot of `url` at `width`×`height` written to
/// `target/{name}`, checked to be one.
pub fn screenshot(chromium: &Path, profile: &str, url: &str, size: (u32, u32), name: &str) {
    let shot = target_dir().join(name);
    let _ = std::fs::remove_file(&shot);
    let arg = format!("--screenshot={}", shot.display());
    let window = format!("--window-size={},{}", size.0, size.1);
    let output = browse(
        chromium,
        profile,
        &[&arg, &window, "--hide-scrollbars"],
        url,
    );
    assert!(output.status.success(), "{output:?}");
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG"), "{name} is not a PNG");
}

/// The colours of a heat map's links (`stroke` of lines inside `heat`
/// groups and NoC links), idle grey left out.
pub fn heat_colours(svg: &str) -> Vec<&str> {
    svg.split("stroke=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|c| c.starts_with('#') && c.len() == 7 && *c != "#cccccc" && *c != "#ccc")
        .collect()
}
