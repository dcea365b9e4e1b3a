//! What every port of an operator allows the clients that connect to it, whoever they are: the
//! webhooks' port is open to anything that reaches the Service, and the endpoints' port to
//! anything in the cluster's network.
//!
//! - A cap on open connections ([`Limits::max_connections`]), and on those of one peer address
//!   ([`Limits::max_per_peer`]), kept fair by `peers`: at a cap, the oldest idle connection of
//!   the peer holding the most is closed to make room (`operator_connections_closed_idle_total`),
//!   and only when all of those have a request in flight is the new one closed
//!   (`operator_connections_refused_total`). So a client renewing a thousand idle connections
//!   closes its own, and the API server and the kubelet's probes, other peers, are answered.
//!   Both ports' caps together stay under the process's open-files limit, so a flood runs into
//!   the caps, not into that limit, where it would also stop the operator's own requests to
//!   the API server.
//! - A deadline for a connection's first byte ([`Limits::first_byte`]): every real client
//!   sends at once (the API server its TLS ClientHello, a probe its request).
//! - A deadline for a request's headers ([`Limits::headers`]), which hyper also applies while a
//!   kept-alive connection waits for its next request: a client that connects and sends nothing,
//!   or sends its headers a byte at a time, is closed, and an idle connection does not hold a
//!   slot under the cap for long.
//! - A deadline for an answer the client stops reading ([`Limits::stalled_write`]): a write
//!   that makes no progress for that long fails the connection, so an unread answer cannot hold
//!   what is behind it (a conversion's turn, a body's memory) for longer.
//!
//! - A cap on what one connection buffers ([`READ_BUFFER`]): its headers, and the chunk of a
//!   body it has read before that body's budget has room for it (see `request_budget`), so the
//!   memory outside the budgets is at most the cap on connections times this.
//!
//! The body of a request and the whole request have deadlines of their own, by route (see
//! `request_budget`); a TLS handshake has the headers' deadline.
//!
//! A server that drains ([`Limits::serve_draining`]) keeps answering after the operator is
//! asked to stop: it accepts no new connection, answers each open one's next request with
//! `Connection: close`, and ends once they are closed. A client that keeps connections alive,
//! as the API server does with the webhooks', then moves to another replica after one more
//! answer, rather than writing a request into a connection the stopping replica closed.
//!
//! The server is hyper's HTTP/1 connection under these limits, with axum's router as its
//! service: every port serves HTTP/1 only, so nothing here builds HTTP/2.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{Router, body::Body};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    time::Sleep,
};
use tower::ServiceExt as _;

use crate::metrics::Metrics;

mod peers;

#[cfg(feature = "webhooks")]
use crate::shutdown::Shutdown;
use peers::{Admitted, Connection, Peers, Slot};

/// How long a draining server waits for its connections to close: each closes after its next
/// answer, and an idle one when the headers' deadline ends it.
pub const DRAIN: Duration = Duration::from_secs(10);

/// The most one connection reads ahead: a request's headers must fit (the API server's take a
/// few hundred bytes; a longer head is answered 431), and a body arrives in chunks of at most
/// this. hyper's default, about 400 KiB, would let 1,024 connections hold 400 MiB outside the
/// bodies' budget.
pub const READ_BUFFER: usize = 64 * 1024;

/// The limits of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The port's name in `operator_connections_refused_total`.
    pub port: &'static str,
    /// Connections open at once, lowered to a share of the open-files limit when that is
    /// smaller: half of what the soft limit leaves after a reserve for the operator's own.
    pub max_connections: usize,
    /// Connections one peer address may hold at once.
    pub max_per_peer: usize,
    /// How long a new connection may wait before its first byte.
    pub first_byte: Duration,
    /// How long a request's headers may take to arrive, counted from the end of the request
    /// before on the same connection (or from its TLS handshake): also how long an idle
    /// kept-alive connection stays open.
    pub headers: Duration,
    /// How long a write to the client may make no progress before the connection fails.
    pub stalled_write: Duration,
}

/// The webhooks' port. The API server waits 10 seconds for an admission answer (the generated
/// `timeoutSeconds`) and 30 for a conversion, and keeps a pool of connections it reuses: a few
/// per replica of the API server. The headers' deadline is under the admission timeout, so a
/// slow client is gone before the API server would give up on a request behind it.
///
/// Each API server is one peer, with a connection per admission request in flight (the port
/// serves HTTP/1): a quarter of the port is far more than one needs.
pub const WEBHOOKS: Limits = Limits {
    port: "webhooks",
    max_connections: 1024,
    max_per_peer: 256,
    first_byte: Duration::from_secs(2),
    headers: Duration::from_secs(5),
    stalled_write: Duration::from_secs(5),
};

/// `/metrics`, `/healthz` and `/readyz`: the kubelet's probes (a new connection each, with a
/// timeout of 1 second) and Prometheus' scrapes (one kept-alive connection each). The
/// kubelet's probe waits a second, so headers that take longer are from no probe. The cap is
/// far above what those need.
///
/// The kubelet and each Prometheus are one peer each, with a connection or two.
pub const ENDPOINTS: Limits = Limits {
    port: "endpoints",
    max_connections: 1024,
    max_per_peer: 64,
    first_byte: Duration::from_secs(2),
    headers: Duration::from_secs(5),
    stalled_write: Duration::from_secs(5),
};

impl Limits {
    /// Serves `routes` on `listener` over plain HTTP under these limits, until the process
    /// ends; an error only if the listener cannot be used.
    pub async fn serve_plain(
        self,
        listener: std::net::TcpListener,
        routes: Router,
        metrics: &Arc<Metrics>,
    ) -> io::Result<()> {
        self.serve(listener, routes, |stream| async { Ok(stream) }, metrics)
            .await
    }

    /// Serves `routes` on `listener` under these limits, each connection capped and guarded,
    /// then through `handshake` (TLS, say) within the headers' deadline, until the process
    /// ends; an error only if the listener cannot be used.
    pub async fn serve<H, Fut, Io>(
        self,
        listener: std::net::TcpListener,
        routes: Router,
        handshake: H,
        metrics: &Arc<Metrics>,
    ) -> io::Result<()>
    where
        H: Fn(Guarded<TcpStream>) -> Fut,
        Fut: Future<Output = io::Result<Io>> + Send + 'static,
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let accepting = self.accepting(listener, routes, handshake, metrics);
        accepting.until(std::future::pending()).await.map(drop)
    }

    /// [`Limits::serve`] until `shutdown` is requested, then drains (see the module's docs)
    /// for at most [`DRAIN`]; `shutdown` waits for it ([`Shutdown::drained`]).
    #[cfg(feature = "webhooks")]
    pub(crate) async fn serve_draining<H, Fut, Io>(
        self,
        listener: std::net::TcpListener,
        routes: Router,
        handshake: H,
        metrics: &Arc<Metrics>,
        shutdown: &Shutdown,
    ) -> io::Result<()>
    where
        H: Fn(Guarded<TcpStream>) -> Fut,
        Fut: Future<Output = io::Result<Io>> + Send + 'static,
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let _draining = shutdown.draining();
        let accepting = self.accepting(listener, routes, handshake, metrics);
        let capped = accepting.until(shutdown.requested()).await?;
        tracing::info!(
            port = self.port,
            "asked to stop; answering open connections once more"
        );
        capped.draining.store(true, Ordering::SeqCst);
        if tokio::time::timeout(DRAIN, capped.peers.all_closed())
            .await
            .is_err()
        {
            tracing::info!(
                port = self.port,
                "connections still open after {DRAIN:?}; closing them"
            );
        }
        Ok(())
    }

    /// The accept loop of `listener`, not started yet.
    fn accepting<H, Fut, Io>(
        self,
        listener: std::net::TcpListener,
        routes: Router,
        handshake: H,
        metrics: &Arc<Metrics>,
    ) -> Accepting<H>
    where
        H: Fn(Guarded<TcpStream>) -> Fut,
        Fut: Future<Output = io::Result<Io>> + Send + 'static,
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        Accepting {
            limits: self,
            listener,
            routes,
            handshake,
            capped: Capped::new(self, Arc::clone(metrics)),
        }
    }

    /// One connection, from its handshake, within the headers' deadline, to its close: hyper's
    /// HTTP/1, with the headers' deadline, serving `routes`; once `draining`, each answer
    /// says `Connection: close`, and hyper closes the connection after it.
    async fn connection<Io>(
        self,
        handshake: impl Future<Output = io::Result<Io>>,
        routes: Router,
        draining: Arc<AtomicBool>,
        held: Arc<Connection>,
    ) where
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        // Closed to make room for another: dropping the connection closes it.
        tokio::select! {
            () = self.served(handshake, routes, draining, &held) => {}
            () = held.evicted() => {
                tracing::debug!(port = self.port, "an idle connection closed to make room");
            }
        }
    }

    /// [`Limits::connection`] until it closes, each request counted in flight on `held`.
    async fn served<Io>(
        self,
        handshake: impl Future<Output = io::Result<Io>>,
        routes: Router,
        draining: Arc<AtomicBool>,
        held: &Arc<Connection>,
    ) where
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = match tokio::time::timeout(self.headers, handshake).await {
            Ok(Ok(io)) => io,
            Ok(Err(error)) => {
                tracing::debug!(%error, port = self.port, "a connection's handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(port = self.port, "a connection's handshake took too long");
                return;
            }
        };
        let held = Arc::clone(held);
        let service = routes
            .map_request(|request: http::Request<Incoming>| request.map(Body::new))
            .map_future(move |answer| {
                let in_flight = held.request();
                async move {
                    let answer = answer.await;
                    drop(in_flight);
                    answer
                }
            })
            .map_response(move |mut response: http::Response<Body>| {
                if draining.load(Ordering::SeqCst) {
                    response.headers_mut().insert(
                        http::header::CONNECTION,
                        http::HeaderValue::from_static("close"),
                    );
                }
                response
            });
        let served = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(self.headers)
            .max_buf_size(READ_BUFFER)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
            .await;
        if let Err(error) = served {
            tracing::debug!(%error, port = self.port, "a connection ended with an error");
        }
    }
}

#[cfg(test)]
impl Limits {
    /// Serves `routes` under these limits on a loopback port, plain HTTP, in a task of its own;
    /// returns its address.
    pub(crate) fn serve_on_loopback(
        self,
        routes: Router,
        metrics: &Arc<Metrics>,
    ) -> std::net::SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let metrics = Arc::clone(metrics);
        tokio::spawn(async move { self.serve_plain(listener, routes, &metrics).await });
        addr
    }
}

/// A port's accept loop and what each connection it accepts gets.
struct Accepting<H> {
    limits: Limits,
    listener: std::net::TcpListener,
    routes: Router,
    handshake: H,
    capped: Capped,
}

impl<H> Accepting<H> {
    /// Accepts connections until `stop`, each served on a task of its own; the connections'
    /// slots once it stops, which free as they close.
    async fn until<Fut, Io>(self, stop: impl Future<Output = ()>) -> io::Result<Capped>
    where
        H: Fn(Guarded<TcpStream>) -> Fut,
        Fut: Future<Output = io::Result<Io>> + Send + 'static,
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Self {
            limits,
            listener,
            routes,
            handshake,
            capped,
        } = self;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        tokio::pin!(stop);
        loop {
            let accepted = tokio::select! {
                biased;
                () = &mut stop => return Ok(capped),
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of open files, say: wait rather than spin, and keep accepting.
                    tracing::debug!(%error, port = limits.port, "could not accept a connection");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            let Some(guarded) = capped.admit(stream, peer.ip().to_canonical()) else {
                continue;
            };
            let draining = Arc::clone(&capped.draining);
            let held = Arc::clone(guarded.slot.connection());
            let served = limits.connection(handshake(guarded), routes.clone(), draining, held);
            tokio::spawn(served);
        }
    }
}

/// How long to wait before accepting again after accepting failed.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Accepts a connection only when `peers` finds it a slot, sets `TCP_NODELAY` on it (an
/// answer streamed in chunks would otherwise wait on the client's delayed acknowledgement of
/// the one before, some 40 ms each), and guards its reads and writes.
struct Capped {
    limits: Limits,
    peers: Arc<Peers>,
    metrics: Arc<Metrics>,
    /// Whether the server drains: every answer closes its connection.
    draining: Arc<AtomicBool>,
}

impl Capped {
    fn new(limits: Limits, metrics: Arc<Metrics>) -> Self {
        metrics.expect_connections_refused(limits.port);
        let max_connections = limits.max_connections.min(open_files_share());
        if max_connections < limits.max_connections {
            tracing::warn!(
                port = limits.port,
                max_connections,
                "the open-files limit allows fewer connections than the port's cap"
            );
        }
        Self {
            limits,
            peers: Peers::new(&limits, max_connections),
            metrics,
            draining: Arc::default(),
        }
    }

    /// `stream` from `peer`, guarded and holding a slot; `None` when every slot it could take
    /// has a request in flight (counted in `operator_connections_refused_total`) or the
    /// socket cannot be set up, and the stream is closed as it drops.
    fn admit(&self, stream: TcpStream, peer: std::net::IpAddr) -> Option<Guarded<TcpStream>> {
        let slot = match self.peers.admit(peer) {
            Admitted::Yes { slot, made_room } => {
                if made_room {
                    self.metrics.connection_closed_idle(self.limits.port);
                }
                slot
            }
            Admitted::No => {
                self.metrics.connection_refused(self.limits.port);
                return None;
            }
        };
        stream.set_nodelay(true).ok()?;
        Some(Guarded::new(stream, slot, &self.limits))
    }
}

/// The open files a port's connections may take: what the soft limit leaves after a reserve
/// for the operator's own (watches, API connections, the process's files), halved between
/// the two ports. Read once per port, after `raise_open_files_limit`.
fn open_files_share() -> usize {
    /// Open files kept for everything but the ports' connections.
    const RESERVED: u64 = 256;
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    limit.map_or(usize::MAX, |limit| {
        usize::try_from(limit.saturating_sub(RESERVED) / 2).unwrap_or(usize::MAX)
    })
}

/// A connection that holds its slot under the cap until it closes, and fails a write that
/// makes no progress for its deadline.
/// Its first read fails, too, when no byte arrives within [`Limits::first_byte`].
pub struct Guarded<S> {
    inner: S,
    slot: Slot,
    stalled_write: Duration,
    /// Armed when a write could not go on, disarmed by any progress.
    write_deadline: Option<Pin<Box<Sleep>>>,
    /// Until the first byte is read: the deadline for it.
    first_byte: Option<Pin<Box<Sleep>>>,
}

impl<S> Guarded<S> {
    fn new(inner: S, slot: Slot, limits: &Limits) -> Self {
        Self {
            inner,
            slot,
            stalled_write: limits.stalled_write,
            write_deadline: None,
            first_byte: Some(Box::pin(tokio::time::sleep(limits.first_byte))),
        }
    }

    /// What a write that could not go on now answers: still pending, or, once it has waited
    /// for [`Limits::stalled_write`], an error that closes the connection.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let stalled_write = self.stalled_write;
        let deadline = self
            .write_deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stalled_write)));
        ready!(deadline.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing of the answer for {stalled_write:?}"),
        )))
    }

    /// `polled`, with the write deadline armed while it is pending and disarmed once it is not.
    fn guard<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => self.stalled(cx),
            ready => {
                self.write_deadline = None;
                ready
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        let Some(deadline) = &mut this.first_byte else {
            return polled;
        };
        match polled {
            Poll::Ready(read) => {
                this.first_byte = None;
                Poll::Ready(read)
            }
            Poll::Pending => {
                ready!(deadline.as_mut().poll(cx));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client sent nothing after connecting",
                )))
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.guard(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.guard(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.guard(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.guard(cx, polled)
    }
}

/// Raises this process's soft limit of open files to its hard limit, and says so: the soft
/// limit a container starts with (often 1,024) is a choice of its runtime, not of the
/// operator, and every watch, API connection and client connection takes one.
pub(crate) fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        tracing::info!(open_files = ?limit.current, "open files limit");
        return;
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!(
            from = ?limit.current,
            to = ?limit.maximum,
            "raised the open files limit to its hard limit"
        ),
        Err(error) => tracing::warn!(
            %error,
            open_files = ?limit.current,
            "could not raise the open files limit"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;
    use crate::metrics::ReadyWhen;

    const TIGHT: Limits = Limits {
        port: "test",
        max_connections: 3,
        max_per_peer: 3,
        first_byte: Duration::from_millis(300),
        headers: Duration::from_millis(300),
        stalled_write: Duration::from_millis(300),
    };

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new(ReadyWhen::WatchesListed(0)))
    }

    async fn serve(limits: Limits, router: axum::Router, metrics: &Arc<Metrics>) -> SocketAddr {
        limits.serve_on_loopback(router, metrics)
    }

    async fn get(addr: SocketAddr, path: &str) -> io::Result<String> {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok(answer)
    }

    fn hello() -> axum::Router {
        axum::Router::new().route("/", axum::routing::get(|| async { "hello" }))
    }

    /// A connection to `addr` from the loopback address `from`, a peer of its own.
    async fn connect_from(from: [u8; 4], addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((from, 0)))?;
        socket.connect(addr).await
    }

    #[tokio::test]
    async fn one_peer_renewing_a_thousand_idle_connections_cannot_keep_another_from_an_answer() {
        // Two descriptors a connection, client and server, in this one process.
        raise_open_files_limit();
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let needed = 2 * WEBHOOKS.max_connections as u64 + 256;
        if limit.is_some_and(|limit| limit < needed) {
            panic!("this test needs {needed} open files, and the hard limit is {limit:?}");
        }
        let metrics = metrics();
        let addr = serve(WEBHOOKS, hello(), &metrics).await;
        // The flood: 127.0.0.1 keeps the port's cap of idle connections open, opening a new
        // one as fast as it can and dropping its own oldest past the cap.
        let flood = tokio::spawn(async move {
            let mut held = std::collections::VecDeque::new();
            loop {
                if let Ok(stream) = connect_from([127, 0, 0, 1], addr).await {
                    held.push_back(stream);
                }
                if held.len() > WEBHOOKS.max_connections {
                    held.pop_front();
                }
                tokio::task::yield_now().await;
            }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        // The API server: another address, every request answered.
        for _ in 0..50 {
            let mut stream = connect_from([127, 0, 0, 2], addr).await.expect("connect");
            stream
                .write_all(b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")
                .await
                .expect("a request");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("an answer");
            assert!(answer.contains("hello"), "{answer}");
        }
        flood.abort();
        let rendered = metrics.render();
        let closed = rendered
            .lines()
            .find(|line| {
                line.starts_with("operator_connections_closed_idle_total{port=\"webhooks\"}")
            })
            .and_then(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        assert!(
            closed > 0,
            "the flood's own idle connections made room:\n{rendered}"
        );
    }

    /// A router whose `/hang` never answers: a request in flight for as long as it is open.
    fn hello_and_hang() -> axum::Router {
        hello().route("/hang", axum::routing::get(std::future::pending::<&str>))
    }

    #[tokio::test]
    async fn at_the_cap_the_oldest_idle_connection_is_closed_to_make_room() {
        let metrics = metrics();
        let addr = serve(TIGHT, hello(), &metrics).await;
        let mut idle = Vec::new();
        for _ in 0..TIGHT.max_connections {
            idle.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let answer = get(addr, "/").await.expect("an answer");
        assert!(answer.contains("hello"), "{answer}");
        let mut oldest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_millis(100), idle[0].read_to_end(&mut oldest))
                .await;
        assert!(closed.is_ok(), "the oldest idle connection is closed");
        assert!(
            metrics
                .render()
                .contains("operator_connections_closed_idle_total{port=\"test\"} 1"),
            "{}",
            metrics.render()
        );
    }

    #[tokio::test]
    async fn a_connection_is_refused_only_while_every_slot_has_a_request_in_flight() {
        let metrics = metrics();
        let addr = serve(TIGHT, hello_and_hang(), &metrics).await;
        let mut busy = Vec::new();
        for _ in 0..TIGHT.max_connections {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            stream
                .write_all(b"GET /hang HTTP/1.1\r\nhost: test\r\n\r\n")
                .await
                .expect("a request");
            busy.push(stream);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Accepted, then closed at once: the answer is empty or a reset.
        let over = get(addr, "/").await.unwrap_or_default();
        assert!(!over.contains("hello"), "{over}");
        assert!(
            metrics
                .render()
                .contains("operator_connections_refused_total{port=\"test\"} 1"),
            "{}",
            metrics.render()
        );
        busy.pop();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let answer = get(addr, "/").await.expect("an answer");
        assert!(answer.contains("hello"), "{answer}");
    }

    #[tokio::test]
    async fn a_client_that_sends_no_headers_in_time_is_closed_and_frees_its_slot() {
        let metrics = metrics();
        let addr = serve(TIGHT, hello(), &metrics).await;
        let mut slow = Vec::new();
        for _ in 0..TIGHT.max_connections {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            stream
                .write_all(b"GET / HTTP/1.1\r\nhost:")
                .await
                .expect("a start");
            slow.push(stream);
        }
        tokio::time::sleep(TIGHT.headers * 2).await;
        for mut stream in slow {
            let mut rest = Vec::new();
            // Closed by the server: read to the end, whatever it sent before closing.
            let _ = stream.read_to_end(&mut rest).await;
            assert!(!String::from_utf8_lossy(&rest).contains("hello"));
        }
        let answer = get(addr, "/").await.expect("an answer");
        assert!(answer.contains("hello"), "{answer}");
    }

    #[cfg(feature = "webhooks")]
    #[tokio::test]
    async fn once_asked_to_stop_a_draining_server_answers_an_open_connection_once_more_and_closes_it()
     {
        let metrics = metrics();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let (shutdown, trigger) = Shutdown::manual();
        let server = tokio::spawn({
            let (shutdown, metrics) = (shutdown.clone(), Arc::clone(&metrics));
            async move {
                let plain = |stream| async { Ok(stream) };
                WEBHOOKS
                    .serve_draining(listener, hello(), plain, &metrics, &shutdown)
                    .await
            }
        });
        let mut kept = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = b"GET / HTTP/1.1\r\nhost: test\r\n\r\n";
        let mut buffer = vec![0; 4096];
        kept.write_all(request).await.expect("a request");
        let read = kept.read(&mut buffer).await.expect("an answer");
        let first = String::from_utf8_lossy(&buffer[..read]).to_lowercase();
        assert!(
            first.contains("hello") && !first.contains("connection: close"),
            "{first}"
        );
        trigger.stop();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !server.is_finished(),
            "it drains while a connection is open"
        );
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "a stopping server accepts no new connection"
        );
        kept.write_all(request)
            .await
            .expect("the same connection, reused");
        let mut rest = Vec::new();
        kept.read_to_end(&mut rest)
            .await
            .expect("answered, then closed");
        let last = String::from_utf8_lossy(&rest).to_lowercase();
        assert!(
            last.contains("hello") && last.contains("connection: close"),
            "{last}"
        );
        tokio::time::timeout(Duration::from_secs(2), server)
            .await
            .expect("done once its connections closed")
            .expect("ran")
            .expect("served");
        let waited = tokio::time::timeout(Duration::from_secs(1), shutdown.drained(DRAIN)).await;
        assert!(waited.is_ok(), "the stop no longer waits for it");
    }

    #[tokio::test]
    async fn a_client_that_connects_and_sends_nothing_is_closed_after_the_first_byte_deadline() {
        let quick = Limits {
            first_byte: Duration::from_millis(100),
            headers: Duration::from_secs(30),
            ..TIGHT
        };
        let metrics = metrics();
        let addr = serve(quick, hello(), &metrics).await;
        let mut silent = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "still open long past the first byte's deadline"
        );
        assert!(!String::from_utf8_lossy(&rest).contains("hello"));
        // A client that sends at once is answered, however long the deadline after.
        assert!(get(addr, "/").await.expect("an answer").contains("hello"));
    }

    #[tokio::test]
    async fn an_answer_the_client_does_not_read_fails_its_connection_after_the_deadline() {
        // An answer far larger than the socket buffers, so that its writes stall.
        let big = axum::Router::new().route(
            "/",
            axum::routing::get(|| async { vec![b'x'; 64 * 1024 * 1024] }),
        );
        let metrics = metrics();
        let addr = serve(TIGHT, big, &metrics).await;
        let mut streams = Vec::new();
        for _ in 0..TIGHT.max_connections {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            stream
                .write_all(b"GET / HTTP/1.1\r\nhost: test\r\n\r\n")
                .await
                .expect("a request");
            streams.push(stream);
        }
        // Every slot is held by a client that reads nothing; after the deadline, the server
        // gives each up and a new client is answered.
        tokio::time::sleep(TIGHT.stalled_write * 3).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")
            .await
            .expect("a request");
        let mut head = [0; 12];
        stream.read_exact(&mut head).await.expect("an answer");
        assert_eq!(&head, b"HTTP/1.1 200");
    }
}
