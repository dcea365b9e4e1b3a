//! Who holds the connections of one port, so that no one peer can hold them all.
//!
//! A port allows [`Limits::max_connections`] at once, and one peer address
//! [`Limits::max_per_peer`] of them. At either cap a new connection is not simply closed: the
//! oldest idle connection (one with no request in flight) of the peer holding the most is
//! closed to make room, and only when every one of those is busy is the new one closed. So a
//! client that keeps idle connections open and renews them as they close ends up closing its
//! own, and a second peer (the API server, the kubelet's probes) always gets a connection.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::sync::{Notify, watch};

use super::Limits;

/// The connections open on one port, by peer.
pub(super) struct Peers {
    max_connections: usize,
    max_per_peer: usize,
    held: Mutex<Held>,
    /// How many are open, for a draining server to wait until none is.
    open: watch::Sender<usize>,
}

#[derive(Default)]
struct Held {
    next: u64,
    /// Each peer's connections, oldest first.
    by_peer: HashMap<IpAddr, Vec<Arc<Connection>>>,
    open: usize,
}

/// One open connection, as its port's [`Peers`] sees it.
pub(super) struct Connection {
    id: u64,
    peer: IpAddr,
    /// Requests in flight: idle at zero.
    in_flight: AtomicUsize,
    /// Notified when the connection is closed to make room for another.
    evicted: Notify,
}

impl Connection {
    /// Counts a request in flight until the guard drops.
    pub(super) fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(self))
    }

    /// Resolves once the connection is closed to make room for another.
    pub(super) async fn evicted(&self) {
        self.evicted.notified().await;
    }

    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
    }
}

/// A request in flight on a [`Connection`].
pub(super) struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection's place among its port's: it leaves when this drops.
pub(super) struct Slot {
    peers: Arc<Peers>,
    connection: Arc<Connection>,
}

impl Slot {
    pub(super) fn connection(&self) -> &Arc<Connection> {
        &self.connection
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.peers.leave(&self.connection);
    }
}

/// What became of a new connection.
pub(super) enum Admitted {
    /// It holds a slot; `made_room` when an idle connection was closed for it.
    Yes { slot: Slot, made_room: bool },
    /// Every slot it could take is held by a connection with a request in flight.
    No,
}

impl Peers {
    pub(super) fn new(limits: &Limits, max_connections: usize) -> Arc<Self> {
        Arc::new(Self {
            max_connections,
            max_per_peer: limits.max_per_peer.min(max_connections),
            held: Mutex::default(),
            open: watch::Sender::new(0),
        })
    }

    /// A slot for a new connection from `peer`, closing an idle connection to make room when
    /// a cap is reached: the peer's own oldest at its cap, else the oldest of the peer holding
    /// the most.
    pub(super) fn admit(self: &Arc<Self>, peer: IpAddr) -> Admitted {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let of_peer = held.by_peer.get(&peer).map_or(0, Vec::len);
        let mut made_room = false;
        if of_peer >= self.max_per_peer || held.open >= self.max_connections {
            let from = if of_peer >= self.max_per_peer {
                Some(peer)
            } else {
                held.busiest_with_idle()
            };
            match from.and_then(|from| held.remove_oldest_idle(from)) {
                Some(evicted) => {
                    evicted.evicted.notify_one();
                    made_room = true;
                }
                None => return Admitted::No,
            }
        }
        held.next += 1;
        let connection = Arc::new(Connection {
            id: held.next,
            peer,
            in_flight: AtomicUsize::new(0),
            evicted: Notify::new(),
        });
        held.by_peer
            .entry(peer)
            .or_default()
            .push(Arc::clone(&connection));
        held.open += 1;
        self.open.send_replace(held.open);
        Admitted::Yes {
            slot: Slot {
                peers: Arc::clone(self),
                connection,
            },
            made_room,
        }
    }

    /// Resolves once no connection is open: a draining server waits for it.
    #[cfg(feature = "webhooks")]
    pub(super) async fn all_closed(&self) {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open == 0).await;
    }

    fn leave(&self, connection: &Connection) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.remove(connection.peer, connection.id).is_some() {
            self.open.send_replace(held.open);
        }
    }
}

impl Held {
    /// The peer holding the most connections, of those with one idle.
    fn busiest_with_idle(&self) -> Option<IpAddr> {
        self.by_peer
            .iter()
            .filter(|(_, connections)| connections.iter().any(|c| c.idle()))
            .max_by_key(|(peer, connections)| (connections.len(), std::cmp::Reverse(**peer)))
            .map(|(peer, _)| *peer)
    }

    fn remove_oldest_idle(&mut self, peer: IpAddr) -> Option<Arc<Connection>> {
        let id = self.by_peer.get(&peer)?.iter().find(|c| c.idle())?.id;
        self.remove(peer, id)
    }

    /// Removes a connection, once: an evicted one is removed when evicted, not again when it
    /// closes.
    fn remove(&mut self, peer: IpAddr, id: u64) -> Option<Arc<Connection>> {
        let connections = self.by_peer.get_mut(&peer)?;
        let at = connections.iter().position(|c| c.id == id)?;
        let removed = connections.remove(at);
        if connections.is_empty() {
            self.by_peer.remove(&peer);
        }
        self.open -= 1;
        Some(removed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn peers(max_connections: usize, max_per_peer: usize) -> Arc<Peers> {
        let limits = Limits {
            port: "test",
            max_connections,
            max_per_peer,
            first_byte: Duration::from_secs(1),
            headers: Duration::from_secs(1),
            stalled_write: Duration::from_secs(1),
        };
        Peers::new(&limits, max_connections)
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn slot(admitted: Admitted) -> (Slot, bool) {
        match admitted {
            Admitted::Yes { slot, made_room } => (slot, made_room),
            Admitted::No => panic!("refused"),
        }
    }

    #[test]
    fn a_peer_at_its_cap_closes_its_own_oldest_idle_connection() {
        let peers = peers(10, 2);
        let (first, _) = slot(peers.admit(ip(1)));
        let (second, _) = slot(peers.admit(ip(1)));
        let (_third, made_room) = slot(peers.admit(ip(1)));
        assert!(made_room);
        assert!(
            first
                .connection()
                .evicted
                .notified()
                .now_or_never_is_ready(),
            "the oldest was closed"
        );
        assert!(
            !second
                .connection()
                .evicted
                .notified()
                .now_or_never_is_ready()
        );
        assert_eq!(*peers.open.borrow(), 2);
    }

    #[test]
    fn a_full_port_closes_an_idle_connection_of_the_peer_holding_the_most() {
        let peers = peers(3, 3);
        let (hog_old, _) = slot(peers.admit(ip(1)));
        let _hog_new = slot(peers.admit(ip(1)));
        let (other, _) = slot(peers.admit(ip(2)));
        let (_newcomer, made_room) = slot(peers.admit(ip(3)));
        assert!(made_room);
        assert!(
            hog_old
                .connection()
                .evicted
                .notified()
                .now_or_never_is_ready()
        );
        assert!(
            !other
                .connection()
                .evicted
                .notified()
                .now_or_never_is_ready()
        );
    }

    #[test]
    fn a_new_connection_is_refused_only_when_every_one_it_could_replace_is_busy() {
        let peers = peers(2, 2);
        let (a, _) = slot(peers.admit(ip(1)));
        let (b, _) = slot(peers.admit(ip(2)));
        let _busy = (a.connection().request(), b.connection().request());
        assert!(matches!(peers.admit(ip(3)), Admitted::No));
        drop(_busy);
        assert!(matches!(
            peers.admit(ip(3)),
            Admitted::Yes {
                made_room: true,
                ..
            }
        ));
    }

    #[test]
    fn a_closed_connection_leaves_once_even_after_it_was_evicted() {
        let peers = peers(1, 1);
        let (first, _) = slot(peers.admit(ip(1)));
        let (second, _) = slot(peers.admit(ip(2)));
        drop(first);
        assert_eq!(*peers.open.borrow(), 1, "the evicted one left when evicted");
        drop(second);
        assert_eq!(*peers.open.borrow(), 0);
    }

    /// Whether a `notified()` future is ready at once: a permit was stored for it.
    trait NowOrNever {
        fn now_or_never_is_ready(self) -> bool;
    }

    impl NowOrNever for tokio::sync::futures::Notified<'_> {
        fn now_or_never_is_ready(self) -> bool {
            let mut notified = std::pin::pin!(self);
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            std::future::Future::poll(notified.as_mut(), &mut cx).is_ready()
        }
    }
}
