//! The listen backlog: connections the kernel completes while the gateway is not accepting.
//! With the usual 128, the 130th connection of a burst has its SYN dropped and waits a second
//! for the retransmission; the gateway asks for 1,024.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use common::{Client, Gateway};

/// Connections opened while the gateway is stopped: more than 128, fewer than 1,024 and than
/// Linux's default `net.core.somaxconn` (4096), which caps any backlog.
const BURST: usize = 600;

/// Resumes the gateway however the test ends.
struct Stopped<'a>(&'a Gateway);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        self.0.signal("CONT");
    }
}

#[test]
fn a_burst_of_connections_waits_in_the_backlog() {
    let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap_or_default();
    let somaxconn: usize = somaxconn.trim().parse().unwrap_or(4096);
    assert!(
        somaxconn > BURST,
        "net.core.somaxconn is {somaxconn}: this machine caps every backlog under {BURST}"
    );
    let gateway = Gateway::start(&["--quota", "1000/s"]);
    let stopped = Stopped(&gateway);
    gateway.signal("STOP");
    let mut held = Vec::with_capacity(BURST);
    for n in 0..BURST {
        // A connection beyond the backlog gets no SYN-ACK while the gateway is stopped: its
        // connect waits for retransmissions, past this timeout.
        match TcpStream::connect_timeout(&gateway.address, Duration::from_secs(2)) {
            Ok(stream) => held.push(stream),
            Err(error) => panic!(
                "connection {} of {BURST} was not completed by the kernel: {error}",
                n + 1
            ),
        }
    }
    drop(stopped);
    // The queued connections are real ones: the last is served once the gateway accepts.
    let last = held.pop().expect("connections");
    drop(held);
    let response = Client::over(last).send("GET", "/", &[]);
    assert_eq!(response.status, 200);
}
