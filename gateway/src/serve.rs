//! Listening and accepting: HTTP/1.1 and HTTP/2 (prior knowledge) on every connection, each
//! request answered by the routing table current when it arrives.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpSocket};

use crate::counters::Counters;
use crate::routing::{Gateway, Table};

/// The listen backlog: connections the kernel completes before the gateway accepts them.
/// With 128 (the usual default), a burst of new connections beyond it has its SYNs dropped,
/// and each such client waits for its retransmission, a second later. Linux caps the backlog
/// at `net.core.somaxconn` (4096 by default since Linux 5.4), so a smaller system setting
/// wins over this one.
pub(crate) const BACKLOG: u32 = 1024;

/// How long a connection may stay silent before its first byte, and an HTTP/1.1 request's head
/// take to arrive (also the longest wait for the next request on a kept-alive connection): a
/// client that opens connections and sends nothing, or trickles its headers, holds a
/// descriptor for at most this long.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The first and the longest pause after a failed accept: out of descriptors (`EMFILE`), an
/// accept fails again at once until a connection closes, and retrying at once would spin.
const ACCEPT_PAUSE: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// Binds `address` with a backlog of [`BACKLOG`].
pub(crate) fn listen(address: SocketAddr) -> Result<TcpListener, String> {
    let named = |e: std::io::Error| format!("--listen {address}: {e}");
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(named)?;
    // As `TcpListener::bind` does on Unix: a restarted gateway can bind while connections of
    // the previous one linger in TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuseaddr(true).map_err(named)?;
    socket.bind(address).map_err(named)?;
    socket.listen(BACKLOG).map_err(named)
}

/// Accepts connections for ever, serving each request with the table current when it arrives.
pub(crate) async fn serve(listener: TcpListener, table: Arc<ArcSwap<Table>>, counters: Arc<Counters>) {
    let mut pause = None;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                pause = None;
                accepted
            }
            Err(error) => {
                // Twice as long each time in a row, up to the longest: one line per pause.
                let next = pause.map_or(ACCEPT_PAUSE.0, |last: Duration| (last * 2).min(ACCEPT_PAUSE.1));
                eprintln!("accept: {error} (next try in {next:?})");
                tokio::time::sleep(next).await;
                pause = Some(next);
                continue;
            }
        };
        let service = Gateway {
            table: Arc::clone(&table),
            counters: Arc::clone(&counters),
            peer,
        };
        tokio::spawn(async move {
            // The automatic builder waits for the first bytes to tell HTTP/1.1 from HTTP/2, with
            // no timeout of its own: a connection silent that long is closed here.
            let mut first = [0; 1];
            if !matches!(
                tokio::time::timeout(HEAD_TIMEOUT, stream.peek(&mut first)).await,
                Ok(Ok(1..))
            ) {
                return;
            }
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // hyper's head timeout needs a timer to take effect.
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT);
            builder.http2().timer(TokioTimer::new());
            // A client that goes away mid-request is not the gateway's error.
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
