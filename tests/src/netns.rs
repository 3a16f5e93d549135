//! Network partitions for the fault suite: a network namespace made by the
//! test (`ip netns`) joined to this host by one veth pair, so a child run
//! inside it (`ip netns exec`) reaches the host's services only through that
//! link, and the test can cut the link and heal it.
//!
//! Owns the namespace, the pair and their /30 addresses, and removes them
//! when dropped (deleting the namespace takes its end of the pair with it).
//! Must never touch any interface it did not create, and never run without
//! the privileges `ip netns` needs: [`NetNs::create`] says why it cannot,
//! and the caller skips with that line (or fails under `CI=true`, where the
//! suite runs as root and a partition row must not pass unrun).

use std::net::Ipv4Addr;
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
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // The namespace's end goes with the namespace, and a veth pair
        // with either end.
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.host_if]);
    }
}
