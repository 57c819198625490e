//! The real gateway binary on a free loopback port, a plain HTTP/1.1 client over one TCP
//! connection, and an upstream server that records what it receives.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The gateway under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_tollgate-gateway");

/// The longest any wait of these tests lasts before it fails.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Runs the gateway with `args` to its end (for command lines it refuses).
pub fn run(args: &[&str]) -> Output {
    let child = Command::new(BINARY)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway binary starts");
    let pid = child.id();
    let (done, waited) = channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match waited.recv_timeout(PATIENCE) {
        Ok(output) => output.expect("the gateway's output is read"),
        Err(_) => {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("the gateway with {args:?} did not exit within {PATIENCE:?}");
        }
    }
}

/// One line the gateway wrote, and where.
#[derive(Clone, Debug)]
pub struct Line {
    pub stderr: bool,
    pub text: String,
}

/// A running gateway, killed when dropped.
pub struct Gateway {
    child: Child,
    pub address: SocketAddr,
    /// The banner: the lines printed before the first blank moment (at least the first one).
    pub banner: Vec<String>,
    lines: Receiver<Line>,
    /// Every line read so far.
    pub seen: Arc<Mutex<Vec<Line>>>,
}

impl Gateway {
    /// Starts the gateway with `args` and `--listen 127.0.0.1:0` (unless `args` has `--listen`
    /// or a `--config`), and reads its first line for the bound address.
    pub fn start(args: &[&str]) -> Gateway {
        let mut command = Command::new(BINARY);
        command.args(args);
        if !args.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the gateway binary starts");
        let (sender, lines) = channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        for (stream, stderr) in [
            (
                child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
                false,
            ),
            (
                child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
                true,
            ),
        ] {
            let (sender, seen) = (sender.clone(), Arc::clone(&seen));
            let stream = stream.expect("piped");
            std::thread::spawn(move || {
                for text in BufReader::new(stream).lines().map_while(Result::ok) {
                    let line = Line { stderr, text };
                    seen.lock().unwrap_or_else(|e| e.into_inner()).push(line.clone());
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut gateway = Gateway {
            child,
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            banner: Vec::new(),
            lines,
            seen,
        };
        let first = gateway
            .wait_for(|line| !line.stderr && line.text.starts_with("listening on http://"))
            .unwrap_or_else(|| {
                panic!(
                    "no banner from the gateway with {args:?}: {:?}",
                    gateway.lines_seen()
                )
            });
        let address = first.trim_start_matches("listening on http://");
        let address = address.split(' ').next().unwrap_or_default();
        gateway.address = address.parse().expect("the banner's address");
        gateway.banner.push(first);
        // The rest of the banner is printed at once after the first line.
        while let Ok(line) = gateway.lines.recv_timeout(Duration::from_millis(200)) {
            gateway.banner.push(line.text);
        }
        gateway
    }

    /// The first line from now on that `matches`, within [`PATIENCE`].
    pub fn wait_for(&self, matches: impl Fn(&Line) -> bool) -> Option<String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if matches(&line) {
                return Some(line.text);
            }
        }
    }

    /// The lines that arrive within `quiet`.
    pub fn lines_within(&self, quiet: Duration) -> Vec<Line> {
        let deadline = Instant::now() + quiet;
        let mut lines = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        lines
    }

    /// Every line read so far.
    pub fn lines_seen(&self) -> Vec<Line> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The banner line starting with `prefix`.
    pub fn banner_line(&self, prefix: &str) -> Option<&str> {
        self.banner
            .iter()
            .map(String::as_str)
            .find(|line| line.starts_with(prefix))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`HUP`, `STOP`, `CONT`) with `kill`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal}");
    }

    /// A new connection to the gateway.
    pub fn connect(&self) -> Client {
        Client::connect(self.address)
    }

    /// One request on a connection of its own.
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.connect().send("GET", path, headers)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response: status, fields (lower-case names, every value), body.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: BTreeMap<String, Vec<String>>,
    pub body: Vec<u8>,
}

impl Response {
    /// The field's first value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .and_then(|values| values.first())
            .map(String::as_str)
    }
}

/// An HTTP/1.1 client over one kept-alive connection.
pub struct Client {
    stream: BufReader<TcpStream>,
    address: SocketAddr,
}

impl Client {
    pub fn connect(address: SocketAddr) -> Client {
        Client::over(TcpStream::connect(address).expect("the gateway accepts"))
    }

    /// A client on a connection already open.
    pub fn over(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(PATIENCE)).expect("a timeout");
        let address = stream.peer_addr().expect("a connected stream");
        Client {
            stream: BufReader::new(stream),
            address,
        }
    }

    /// Sends one request (with an empty body) and reads its response.
    pub fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {}\r\n", self.address);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .expect("the request is sent");
        read_response(&mut self.stream).expect("a response")
    }
}

/// Reads one HTTP/1.1 message's head and its body (by `content-length` or chunked).
fn read_response(stream: &mut impl BufRead) -> std::io::Result<Response> {
    let (first, headers) = read_head(stream)?;
    let status = first
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not a status line: {first:?}")))?;
    let body = read_body(stream, &headers)?;
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// The start line and the fields of a message.
fn read_head(stream: &mut impl BufRead) -> std::io::Result<(String, BTreeMap<String, Vec<String>>)> {
    let mut first = String::new();
    if stream.read_line(&mut first)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed"));
    }
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers
                .entry(name.trim().to_ascii_lowercase())
                .or_default()
                .push(value.trim().to_owned());
        }
    }
    Ok((first.trim_end().to_owned(), headers))
}

fn read_body(stream: &mut impl BufRead, headers: &BTreeMap<String, Vec<String>>) -> std::io::Result<Vec<u8>> {
    let field = |name: &str| headers.get(name).and_then(|values| values.first()).cloned();
    if field("transfer-encoding").is_some_and(|coding| coding.contains("chunked")) {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            stream.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16).map_err(std::io::Error::other)?;
            let mut chunk = vec![0; size + 2];
            stream.read_exact(&mut chunk)?;
            if size == 0 {
                return Ok(body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let length = field("content-length").and_then(|n| n.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    Ok(body)
}

/// A request the recording upstream received.
#[derive(Clone, Debug)]
pub struct Received {
    pub start: String,
    pub headers: BTreeMap<String, Vec<String>>,
}

/// An upstream server on a free loopback port that records each request and answers `200`
/// with `extra` fields.
pub struct RecordingUpstream {
    pub address: SocketAddr,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl RecordingUpstream {
    pub fn start(extra: &'static [(&'static str, &'static str)]) -> RecordingUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = listener.local_addr().expect("bound");
        let received = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let record = Arc::clone(&record);
                std::thread::spawn(move || serve_recorded(stream, &record, extra));
            }
        });
        RecordingUpstream { address, received }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn serve_recorded(stream: TcpStream, record: &Mutex<Vec<Received>>, extra: &[(&str, &str)]) {
    let mut reader = BufReader::new(stream);
    while let Ok((start, headers)) = read_head(&mut reader) {
        if read_body(&mut reader, &headers).is_err() {
            return;
        }
        record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Received { start, headers });
        let mut answer = String::from("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n");
        for (name, value) in extra {
            answer.push_str(&format!("{name}: {value}\r\n"));
        }
        answer.push_str("\r\nupstream\n");
        if reader.get_mut().write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A configuration file in a fresh directory of the system's temporary one, removed with it.
pub struct ConfigFile {
    dir: PathBuf,
    pub path: PathBuf,
}

impl ConfigFile {
    pub fn new(text: &str) -> ConfigFile {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        // Relaxed: a counter for unique names; nothing else is ordered by it.
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tollgate-gateway-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let path = dir.join("gateway.toml");
        std::fs::write(&path, text).expect("the file is written");
        ConfigFile { dir, path }
    }

    /// Replaces the file's text: written beside it and renamed over it, so that a reader sees
    /// the old text or the new, never half of one.
    pub fn write(&self, text: &str) {
        let next = self.dir.join("gateway.toml.next");
        std::fs::write(&next, text).expect("the file is written");
        std::fs::rename(&next, &self.path).expect("the file is replaced");
    }

    /// Replaces the file's text with one of the same length, under the old modification time:
    /// a change that the gateway's poll does not see, so that only SIGHUP reloads it.
    pub fn write_unseen(&self, text: &str) {
        let old = std::fs::metadata(&self.path).expect("the file exists");
        assert_eq!(old.len(), text.len() as u64, "the same length");
        let next = self.dir.join("gateway.toml.next");
        std::fs::write(&next, text).expect("the file is written");
        let file = std::fs::File::options().write(true).open(&next).expect("opened");
        file.set_modified(old.modified().expect("a modification time"))
            .expect("the time is set");
        drop(file);
        std::fs::rename(&next, &self.path).expect("the file is replaced");
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn arg(&self) -> &str {
        self.path.to_str().expect("a UTF-8 path")
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `redis-server` on a free loopback port, without persistence, killed when dropped.
pub struct RedisServer {
    child: Child,
    pub port: u16,
}

impl RedisServer {
    /// Starts one (`TOLLGATE_REDIS_SERVER`, or `redis-server` on `PATH`) and waits until it
    /// answers `PING`. A missing server is a failure, not a skip.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// [`start`](Self::start), with `extra` arguments (`--requirepass secret`, ...).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let port = free_port();
        let binary = std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        let child = Command::new(&binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{binary} does not start: {error}"));
        let server = RedisServer { child, port };
        let deadline = Instant::now() + PATIENCE;
        while !server.answers() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not answer PING"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        // A server started with `--requirepass` answers `-NOAUTH Authentication required.`: up.
        let mut reply = [0; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && (&reply == b"+PONG\r\n" || &reply == b"-NOAUTH")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port free now (nothing listens on it once this returns).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}
