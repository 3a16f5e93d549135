//! The failed-authentication limit per peer address, shared by both gRPC
//! servers and the dashboard's sign-in: a token bucket per peer that each
//! refused credential drains and time refills. While a peer's bucket is
//! empty its requests are answered at once, before any token lookup, so a
//! guessing client costs the database nothing.
//!
//! A peer is an IPv4 address, or the /64 network of an IPv6 address (a
//! single host is routinely given a whole /64, so a per-address bucket
//! would be no limit). Memory is bounded: past `max_peers` tracked peers,
//! fully refilled buckets are dropped, then the least recently failed.
//!
//! Behind a proxy or load balancer the peer is the proxy, and one guessing
//! client then holds every client behind it back: switch the limit off
//! (0 per minute) there, or limit at the proxy.
//!
//! Must never hold its lock across an await, and never look a token up.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tonic::Status;
use tonic::metadata::MetadataValue;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Failures the peer may still make.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

/// Failed authentications per minute per peer, with their buckets.
#[derive(Debug)]
pub struct FailedAuthLimit {
    per_minute: u32,
    max_peers: usize,
    peers: Mutex<HashMap<IpAddr, Bucket>>,
}

/// The key a peer's failures count under: an IPv4 address (an IPv4-mapped
/// IPv6 one included), or an IPv6 address's /64 network.
pub fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

impl FailedAuthLimit {
    /// `per_minute` failures per peer (also the burst a peer may spend at
    /// once; 0 switches the limit off), tracking at most `max_peers` peers
    /// (at least 1).
    pub fn new(per_minute: u32, max_peers: usize) -> Self {
        FailedAuthLimit {
            per_minute,
            max_peers: max_peers.max(1),
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the limit is switched off.
    pub fn is_off(&self) -> bool {
        self.per_minute == 0
    }

    fn capacity(&self) -> f64 {
        f64::from(self.per_minute)
    }

    fn per_second(&self) -> f64 {
        f64::from(self.per_minute) / 60.0
    }

    fn refilled(&self, b: &Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        (b.tokens + elapsed * self.per_second()).min(self.capacity())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Bucket>> {
        // A poisoned lock only means another request panicked mid-update;
        // the numbers are still usable.
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Ok` while `peer` may still fail, else `Err(wait)` until it may
    /// again. Takes nothing; an unknown peer (`None`: no socket address,
    /// an in-process call) is never limited.
    pub fn check(&self, peer: Option<IpAddr>) -> Result<(), Duration> {
        self.check_at(peer, Instant::now())
    }

    /// [`Self::check`] at `now`.
    pub fn check_at(&self, peer: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let Some(ip) = peer else { return Ok(()) };
        if self.is_off() {
            return Ok(());
        }
        let peers = self.lock();
        let Some(b) = peers.get(&peer_key(ip)) else {
            return Ok(());
        };
        let tokens = self.refilled(b, now);
        if tokens >= 1.0 {
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                ((1.0 - tokens) / self.per_second()).min(3600.0),
            ))
        }
    }

    /// Count one failed authentication of `peer`. Returns whether the peer
    /// has just run out (its next request is refused).
    pub fn record_failure(&self, peer: Option<IpAddr>) -> bool {
        self.record_failure_at(peer, Instant::now())
    }

    /// [`Self::record_failure`] at `now`.
    pub fn record_failure_at(&self, peer: Option<IpAddr>, now: Instant) -> bool {
        let Some(ip) = peer else { return false };
        if self.is_off() {
            return false;
        }
        let key = peer_key(ip);
        let mut peers = self.lock();
        if !peers.contains_key(&key) && peers.len() >= self.max_peers {
            self.evict(&mut peers, now);
        }
        let capacity = self.capacity();
        let tokens = match peers.get(&key) {
            Some(b) => self.refilled(b, now),
            None => capacity,
        };
        let left = (tokens - 1.0).max(0.0);
        peers.insert(
            key,
            Bucket {
                tokens: left,
                at: now,
            },
        );
        tokens >= 1.0 && left < 1.0
    }

    /// Make room below `max_peers`: drop every fully refilled bucket (it
    /// answers as a fresh one would), then, if that was not enough, the
    /// least recently updated tenth.
    fn evict(&self, peers: &mut HashMap<IpAddr, Bucket>, now: Instant) {
        let capacity = self.capacity();
        peers.retain(|_, b| self.refilled(b, now) < capacity);
        if peers.len() < self.max_peers {
            return;
        }
        let mut ages: Vec<(Instant, IpAddr)> = peers.iter().map(|(k, b)| (b.at, *k)).collect();
        let drop = (self.max_peers / 10).max(1).min(ages.len());
        ages.select_nth_unstable_by_key(drop - 1, |(at, _)| *at);
        for (_, k) in &ages[..drop] {
            peers.remove(k);
        }
    }

    /// Peers currently tracked.
    pub fn tracked(&self) -> usize {
        self.lock().len()
    }

    /// The answer to a peer that ran out: UNAUTHENTICATED (the credential
    /// was never looked at) with `retry-after-ms`.
    pub fn refusal(wait: Duration) -> Status {
        let ms = wait.as_millis().max(1);
        let mut s = Status::unauthenticated(format!(
            "too many failed authentications from this address; retry in {ms} ms"
        ));
        if let Ok(v) = MetadataValue::try_from(ms.to_string()) {
            s.metadata_mut().insert("retry-after-ms", v);
        }
        s
    }
}

/// The peer of a request a tonic server accepted over TCP.
pub fn peer_of<B>(req: &http::Request<B>) -> Option<IpAddr> {
    req.extensions()
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|i| i.remote_addr())
        .map(|a| a.ip())
}

/// The tower layer in front of a gRPC server's auth layer: refuses a peer
/// that ran out before the request reaches the auth layer (no token lookup),
/// and counts every answer whose headers carry `grpc-status` 16
/// (UNAUTHENTICATED: the auth layer's refusal) as a failure of its peer.
/// Paths `open` accepts (health, reflection) pass untouched.
#[derive(Clone)]
pub struct FailedAuthLayer {
    limit: Arc<FailedAuthLimit>,
    open: fn(&str) -> bool,
}

impl FailedAuthLayer {
    /// A layer counting against `limit`; `open` names the paths served
    /// without a token.
    pub fn new(limit: Arc<FailedAuthLimit>, open: fn(&str) -> bool) -> Self {
        FailedAuthLayer { limit, open }
    }
}

impl<S> tower::Layer<S> for FailedAuthLayer {
    type Service = FailedAuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FailedAuthService {
            inner,
            limit: self.limit.clone(),
            open: self.open,
        }
    }
}

/// The service [`FailedAuthLayer`] wraps around the auth layer.
#[derive(Clone)]
pub struct FailedAuthService<S> {
    inner: S,
    limit: Arc<FailedAuthLimit>,
    open: fn(&str) -> bool,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Whether a response's headers say UNAUTHENTICATED (a trailers-only
/// answer, as an auth refusal is; a streamed answer's status is in its
/// trailers and is not read).
fn unauthenticated<B>(resp: &http::Response<B>) -> bool {
    resp.headers()
        .get("grpc-status")
        .is_some_and(|v| v.as_bytes() == b"16")
}

impl<S, B, RB> tower::Service<http::Request<B>> for FailedAuthService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The clone may not be ready; swap so the ready one serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if (self.open)(req.uri().path()) || self.limit.is_off() {
            return Box::pin(inner.call(req));
        }
        let peer = peer_of(&req);
        if let Err(wait) = self.limit.check(peer) {
            return Box::pin(async move { Ok(FailedAuthLimit::refusal(wait).into_http()) });
        }
        let limit = self.limit.clone();
        let answer = inner.call(req);
        Box::pin(async move {
            let resp = answer.await?;
            if unauthenticated(&resp)
                && limit.record_failure(peer)
                && let Some(ip) = peer
            {
                tracing::warn!(peer = %peer_key(ip), "failed authentications: peer held back until its bucket refills");
            }
            Ok(resp)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::{Layer as _, ServiceExt as _};

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn a_peer_runs_out_after_its_burst_and_refills_by_the_minute() {
        let l = FailedAuthLimit::new(3, 100);
        let t0 = Instant::now();
        assert!(l.check_at(ip(1), t0).is_ok());
        assert!(!l.record_failure_at(ip(1), t0));
        assert!(!l.record_failure_at(ip(1), t0));
        assert!(l.check_at(ip(1), t0).is_ok());
        assert!(l.record_failure_at(ip(1), t0), "the third runs it out");
        let wait = l.check_at(ip(1), t0).expect_err("held back");
        assert!((wait.as_secs_f64() - 20.0).abs() < 1e-6, "{wait:?}");
        assert!(l.check_at(ip(2), t0).is_ok(), "another peer is unaffected");
        // 20 s later (3 per minute) one failure is allowed again.
        let t1 = t0 + Duration::from_secs(20);
        assert!(l.check_at(ip(1), t1).is_ok());
        assert!(l.record_failure_at(ip(1), t1));
        assert!(l.check_at(ip(1), t1).is_err());
        // None (no socket address) and a switched-off limit never refuse.
        assert!(!l.record_failure_at(None, t0));
        assert!(l.check_at(None, t0).is_ok());
        let off = FailedAuthLimit::new(0, 100);
        for _ in 0..100 {
            off.record_failure_at(ip(1), t0);
        }
        assert!(off.check_at(ip(1), t0).is_ok());
        assert_eq!(off.tracked(), 0);
    }

    #[test]
    fn ipv6_peers_count_by_their_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("v6");
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().expect("v6");
        let c: IpAddr = "2001:db8:1:3::1".parse().expect("v6");
        assert_eq!(peer_key(a), peer_key(b));
        assert_ne!(peer_key(a), peer_key(c));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().expect("mapped");
        assert_eq!(peer_key(mapped), ip(1).expect("v4"));
        let l = FailedAuthLimit::new(1, 100);
        let t0 = Instant::now();
        l.record_failure_at(Some(a), t0);
        assert!(l.check_at(Some(b), t0).is_err(), "same /64");
        assert!(l.check_at(Some(c), t0).is_ok());
    }

    #[test]
    fn memory_stays_bounded_by_max_peers() {
        let l = FailedAuthLimit::new(5, 50);
        let t0 = Instant::now();
        for i in 0..10_000u32 {
            let peer = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            l.record_failure_at(Some(peer), t0 + Duration::from_millis(u64::from(i)));
            assert!(l.tracked() <= 50, "{} tracked", l.tracked());
        }
        // Refilled buckets are the first to go: an hour later, a new peer
        // finds a full map of them and leaves only itself.
        let l = FailedAuthLimit::new(5, 50);
        for i in 0..50u32 {
            l.record_failure_at(Some(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))), t0);
        }
        assert_eq!(l.tracked(), 50);
        l.record_failure_at(ip(200), t0 + Duration::from_secs(3600));
        assert_eq!(l.tracked(), 1);
    }

    fn request(path: &str, peer: Option<IpAddr>) -> http::Request<()> {
        let mut req = http::Request::builder()
            .uri(format!("http://h{path}"))
            .body(())
            .expect("request");
        if let Some(ip) = peer {
            req.extensions_mut()
                .insert(tonic::transport::server::TcpConnectInfo {
                    local_addr: None,
                    remote_addr: Some(SocketAddr::new(ip, 40000)),
                });
        }
        req
    }

    async fn call<S>(svc: &mut S, path: &str, peer: Option<IpAddr>) -> http::Response<String>
    where
        S: tower::Service<http::Request<()>, Response = http::Response<String>>,
        S::Error: std::fmt::Debug,
    {
        svc.ready()
            .await
            .expect("ready")
            .call(request(path, peer))
            .await
            .expect("answer")
    }

    /// Once a peer ran out, the inner service (the auth layer and its token
    /// lookup) is not called at all; open paths and other peers still are.
    #[tokio::test]
    async fn a_peer_that_ran_out_never_reaches_the_token_lookup() {
        let lookups = Arc::new(AtomicUsize::new(0));
        let inner = tower::service_fn({
            let lookups = lookups.clone();
            move |_req: http::Request<()>| {
                lookups.fetch_add(1, Ordering::SeqCst);
                async move {
                    Ok::<_, Infallible>(
                        Status::unauthenticated("unknown, expired or revoked token")
                            .into_http::<String>(),
                    )
                }
            }
        });
        let limit = Arc::new(FailedAuthLimit::new(2, 100));
        let mut svc = FailedAuthLayer::new(limit.clone(), |p| p.starts_with("/open/")).layer(inner);
        for _ in 0..2 {
            let r = call(&mut svc, "/genesis.v1.AgentPod/ClaimTick", ip(7)).await;
            assert_eq!(r.headers()["grpc-status"], "16");
        }
        assert_eq!(lookups.load(Ordering::SeqCst), 2);
        let r = call(&mut svc, "/genesis.v1.AgentPod/ClaimTick", ip(7)).await;
        assert_eq!(r.headers()["grpc-status"], "16");
        let status = Status::from_header_map(r.headers()).expect("a status");
        assert!(
            status
                .message()
                .starts_with("too many failed authentications"),
            "{status:?}"
        );
        assert!(r.headers().contains_key("retry-after-ms"));
        assert_eq!(lookups.load(Ordering::SeqCst), 2, "no lookup once out");
        call(&mut svc, "/open/Check", ip(7)).await;
        assert_eq!(lookups.load(Ordering::SeqCst), 3, "open paths pass");
        call(&mut svc, "/genesis.v1.AgentPod/ClaimTick", ip(8)).await;
        assert_eq!(lookups.load(Ordering::SeqCst), 4, "another peer passes");
    }
}
