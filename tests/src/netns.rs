//! Network partitions for the fault suite: a network namespace made by the
//! test (`ip netns`) joined to this host by one veth pair, so a child run
//! inside it (`ip netns exec`) reaches the host's services only through that
//! link, and the test can cut the link and heal it.
//!
//! Owns the namespace, the pair and their /30 addresses, and removes them
//! when dropped (deleting the namespace takes its end of the pair with it);
//! a one-way cut inside the namespace (an nftables table of its own); and a
//! [`Relay`] that lets a child inside reach a host service listening on
//! loopback only (PostgreSQL).
//! Must never touch any interface it did not create, and never run without
//! the privileges `ip netns` needs: [`NetNs::create`] says why it cannot,
//! and the caller skips with that line (or fails under `CI=true`, where the
//! suite runs as root and a partition row must not pass unrun).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;

use anyhow::{Context as _, bail};

/// A namespace and its link to the host.
#[derive(Debug)]
pub struct NetNs {
    /// The namespace, `gx-<hex>`.
    pub name: String,
    /// The pair's host end.
    host_if: String,
    /// The pair's namespace end.
    ns_if: String,
    /// The host end's address: what a child inside reaches the host's
    /// services at (they must listen on it, or on every address).
    pub host_ip: Ipv4Addr,
    /// The namespace end's address: where a child inside listens for the
    /// host.
    pub ns_ip: Ipv4Addr,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("run `ip` (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl NetNs {
    /// Make a namespace linked to the host by a fresh veth pair on a random
    /// /30 of 10.200.0.0/13 (so tests running at once do not collide), both
    /// ends up. `Err` names why this machine cannot (not root, no iproute2).
    pub fn create() -> anyhow::Result<NetNs> {
        let tag: u32 = rand::random();
        let hex = format!("{:08x}", tag);
        // 10.200.0.0/13 holds 2^17 blocks of four addresses.
        let block = (tag % (1 << 17)) * 4;
        let base = u32::from(Ipv4Addr::new(10, 200, 0, 0)) + block;
        let ns = NetNs {
            name: format!("gx-{hex}"),
            host_if: format!("gxh{hex}"),
            ns_if: format!("gxn{hex}"),
            host_ip: Ipv4Addr::from(base + 1),
            ns_ip: Ipv4Addr::from(base + 2),
        };
        ip(&["netns", "add", &ns.name])?;
        // From here on Drop removes what was made.
        ip(&[
            "link",
            "add",
            &ns.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &ns.ns_if,
        ])?;
        ip(&["link", "set", &ns.ns_if, "netns", &ns.name])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/30", ns.host_ip),
            "dev",
            &ns.host_if,
        ])?;
        ip(&["link", "set", &ns.host_if, "up"])?;
        ns.exec(&[
            "ip",
            "addr",
            "add",
            &format!("{}/30", ns.ns_ip),
            "dev",
            &ns.ns_if,
        ])?;
        ns.exec(&["ip", "link", "set", &ns.ns_if, "up"])?;
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    fn exec(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Cut the link from inside: the namespace's end goes down, so a child
    /// inside finds the host unreachable at once (its connections fail,
    /// none hangs on a lost packet) and the host cannot reach it either.
    pub fn cut(&self) -> anyhow::Result<()> {
        self.exec(&["ip", "link", "set", &self.ns_if, "down"])
    }

    /// Bring the link back (its address is kept).
    pub fn heal(&self) -> anyhow::Result<()> {
        self.exec(&["ip", "link", "set", &self.ns_if, "up"])
    }

    /// Cut one way only: every TCP segment arriving in the namespace from
    /// the host's `port` is dropped, while what a child inside sends still
    /// leaves. A request it writes therefore reaches the server, and the
    /// server's answer (and its TCP acknowledgements) never come back: a
    /// publish lands in the stream and its ack is lost. Needs `nft`
    /// (nftables; `scripts/services.sh` installs it as root). One table of
    /// the namespace's own, removed by [`NetNs::allow_inbound`] or with the
    /// namespace.
    pub fn drop_inbound_from(&self, port: u16) -> anyhow::Result<()> {
        self.exec(&["nft", "add", "table", "inet", CUT_TABLE])?;
        self.exec(&[
            "nft",
            "add",
            "chain",
            "inet",
            CUT_TABLE,
            "input",
            "{ type filter hook input priority 0 ; policy accept ; }",
        ])?;
        self.exec(&[
            "nft",
            "add",
            "rule",
            "inet",
            CUT_TABLE,
            "input",
            "ip",
            "saddr",
            &self.host_ip.to_string(),
            "tcp",
            "sport",
            &port.to_string(),
            "drop",
        ])
    }

    /// Undo [`NetNs::drop_inbound_from`]: what was held back by the cut is
    /// retransmitted by the host's TCP and arrives late.
    pub fn allow_inbound(&self) -> anyhow::Result<()> {
        self.exec(&["nft", "delete", "table", "inet", CUT_TABLE])
    }
}

/// The namespace's nftables table of the one-way cut.
const CUT_TABLE: &str = "gx_cut";

/// A TCP relay on the host: connections to [`Relay::addr`] are joined to
/// `to`. A child in a namespace reaches a host service that listens on
/// loopback only (the suite's PostgreSQL) through one on the link's host
/// address. Stops accepting when dropped; joined connections end with
/// either side.
#[derive(Debug)]
pub struct Relay {
    /// Where it accepts.
    pub addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Listen on `listen` (port 0: any free one) and relay to `to`.
    pub async fn start(listen: SocketAddr, to: SocketAddr) -> anyhow::Result<Relay> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("relay: bind {listen}"))?;
        let addr = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    // Out of descriptors or the like: try again shortly
                    // rather than spin.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Ok(Relay { addr, accept })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // The namespace's end goes with the namespace, and a veth pair
        // with either end.
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.host_if]);
    }
}
