//! Which tenants an agent pod may serve, and how ticks reach the pod pool
//! that serves them.
//!
//! An agent-pod token carries a [`PodTenants`] set: empty admits every
//! tenant (the shared pool), otherwise exactly the tenants listed. The
//! supervisor refuses any AgentPod call naming a tenant outside the set of
//! the token that made it.
//!
//! A deployment may run dedicated pools ([`PodPools`], control's
//! `GENESIS_POD_POOLS`): each has a name and the tenants it alone serves.
//! Routing is by subject, since a JetStream consumer can list the subjects
//! it takes but not the ones it leaves (and a WorkQueue stream refuses two
//! consumers whose filters overlap):
//!
//! * a shared tenant's tick goes to `<prefix>.<tenant>`, a dedicated
//!   tenant's to `<prefix>.<pool>.<tenant>`;
//! * the shared consumer filters `<prefix>.*` (one token after the prefix:
//!   never a pool's subject), each pool's consumer `<consumer>-<pool>`
//!   filters `<prefix>.<pool>.*`.
//!
//! Without pools the shared consumer keeps `<prefix>.>`, the filter it has
//! always had, so a deployment that names no pool changes nothing on NATS.
//! Nothing here does I/O.

use std::collections::BTreeSet;
use std::fmt;

use uuid::Uuid;

use crate::error::CoreError;

/// Most tenants one agent-pod token may name.
pub const MAX_POD_TENANTS: usize = 256;
/// Most dedicated pools a deployment may run.
pub const MAX_POD_POOLS: usize = 32;
/// Longest pool name: it ends Kubernetes resource names
/// (`<release>-agent-pod-<pool>`, at most 63 bytes) and consumer names.
pub const MAX_POOL_NAME_BYTES: usize = 20;

/// The tenants an agent-pod token may act for. Empty: every tenant.
/// Sorted and free of duplicates by construction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodTenants(Vec<Uuid>);

impl PodTenants {
    /// The unrestricted set: a shared pool's token.
    pub const fn all() -> Self {
        PodTenants(Vec::new())
    }

    /// A set of exactly `ids`. Refused, naming `field` and the culprit: a
    /// duplicate, the nil UUID, or more than [`MAX_POD_TENANTS`].
    pub fn new(field: &str, ids: impl IntoIterator<Item = Uuid>) -> Result<Self, CoreError> {
        let mut seen = BTreeSet::new();
        for id in ids {
            if id.is_nil() {
                return Err(CoreError::invalid_argument(
                    field,
                    "the nil UUID is not a tenant",
                ));
            }
            if !seen.insert(id) {
                return Err(CoreError::invalid_argument(
                    field,
                    format!("tenant {id} is listed twice"),
                ));
            }
            if seen.len() > MAX_POD_TENANTS {
                return Err(CoreError::invalid_argument(
                    field,
                    format!("at most {MAX_POD_TENANTS} tenants"),
                ));
            }
        }
        Ok(PodTenants(seen.into_iter().collect()))
    }

    /// A set from the text form of each id, as a request carries them;
    /// the first malformed one is named by its index (`field[i]`).
    pub fn parse<S: AsRef<str>>(field: &str, texts: &[S]) -> Result<Self, CoreError> {
        let mut ids = Vec::with_capacity(texts.len().min(MAX_POD_TENANTS + 1));
        for (i, text) in texts.iter().enumerate() {
            let text = text.as_ref();
            let id = Uuid::parse_str(text).map_err(|_| {
                CoreError::invalid_argument(format!("{field}[{i}]"), "must be a UUID")
            })?;
            ids.push(id);
        }
        Self::new(field, ids)
    }

    /// Whether a token of this set may act for `tenant`.
    pub fn admits(&self, tenant: Uuid) -> bool {
        self.0.is_empty() || self.0.binary_search(&tenant).is_ok()
    }

    /// Whether the set admits every tenant.
    pub fn is_all(&self) -> bool {
        self.0.is_empty()
    }

    /// The tenants named, sorted (empty: every tenant).
    pub fn ids(&self) -> &[Uuid] {
        &self.0
    }
}

/// One dedicated pool: its name and the tenants only it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPool {
    name: String,
    tenants: Vec<Uuid>,
}

impl PodPool {
    /// The pool's name (`[a-z0-9-]`, starting and ending alphanumeric).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its tenants, sorted.
    pub fn tenants(&self) -> &[Uuid] {
        &self.tenants
    }
}

/// A deployment's dedicated pools; see the module header for the routing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodPools(Vec<PodPool>);

/// Whether `name` can name a pool: 1 to [`MAX_POOL_NAME_BYTES`] of
/// lower-case letters, digits and `-`, starting and ending alphanumeric (a
/// DNS label, a NATS subject token and a consumer-name suffix at once).
pub fn check_pool_name(name: &str) -> Result<(), String> {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        _ if bytes.len() > MAX_POOL_NAME_BYTES => Err(format!(
            "pool name {name:?} is longer than {MAX_POOL_NAME_BYTES} bytes"
        )),
        (Some(&a), Some(&z))
            if alnum(a) && alnum(z) && bytes.iter().all(|&b| alnum(b) || b == b'-') =>
        {
            Ok(())
        }
        _ => Err(format!(
            "pool name {name:?} must be lower-case letters, digits and '-', starting and ending with a letter or digit"
        )),
    }
}

impl PodPools {
    /// No dedicated pool: every tick goes to the shared consumer.
    pub const fn none() -> Self {
        PodPools(Vec::new())
    }

    /// Parse `name=tenant,tenant;name=tenant` (white space around items is
    /// ignored; empty text is no pool). Refused, with the reason: a bad
    /// name, a name used twice, a pool without tenants, a malformed id, a
    /// tenant listed twice or in two pools, more than [`MAX_POD_POOLS`]
    /// pools or [`MAX_POD_TENANTS`] tenants in one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut pools: Vec<PodPool> = Vec::new();
        let mut placed: BTreeSet<Uuid> = BTreeSet::new();
        for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((name, tenants)) = item.split_once('=') else {
                return Err(format!("{item:?} is not name=tenant,tenant"));
            };
            let name = name.trim();
            check_pool_name(name)?;
            if pools.iter().any(|p| p.name == name) {
                return Err(format!("pool {name:?} is named twice"));
            }
            let texts: Vec<&str> = tenants
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            if texts.is_empty() {
                return Err(format!("pool {name:?} names no tenant"));
            }
            let set = PodTenants::parse(name, &texts).map_err(|e| match e {
                CoreError::InvalidArgument { field, reason } => {
                    format!("pool {field}: {reason}")
                }
                other => other.to_string(),
            })?;
            for t in set.ids() {
                if !placed.insert(*t) {
                    return Err(format!("tenant {t} is in two pools"));
                }
            }
            pools.push(PodPool {
                name: name.to_owned(),
                tenants: set.ids().to_vec(),
            });
            if pools.len() > MAX_POD_POOLS {
                return Err(format!("at most {MAX_POD_POOLS} pools"));
            }
        }
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(PodPools(pools))
    }

    /// For clap's `value_parser`.
    pub fn parse_arg(text: &str) -> Result<Self, String> {
        Self::parse(text)
    }

    /// The pools, by name.
    pub fn pools(&self) -> &[PodPool] {
        &self.0
    }

    /// Whether there is no dedicated pool.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pool serving `tenant`, if one is dedicated to it.
    pub fn pool_of(&self, tenant: Uuid) -> Option<&PodPool> {
        self.0
            .iter()
            .find(|p| p.tenants.binary_search(&tenant).is_ok())
    }

    /// The subject of `tenant`'s ticks: `<prefix>.<pool>.<tenant>` for a
    /// dedicated tenant, `<prefix>.<tenant>` otherwise.
    pub fn subject(&self, prefix: &str, tenant: Uuid) -> String {
        match self.pool_of(tenant) {
            Some(p) => format!("{prefix}.{}.{tenant}", p.name),
            None => format!("{prefix}.{tenant}"),
        }
    }

    /// The shared consumer's filter: `<prefix>.*` while any pool exists;
    /// without pools `<prefix>.>`, or `<prefix>.*` when the consumer
    /// already has it (`current`) — the two take the same subjects then,
    /// and a filter left narrow never has to widen over a retired pool's
    /// consumer, which the stream would refuse as an overlap.
    pub fn shared_filter(&self, prefix: &str, current: Option<&str>) -> String {
        let narrow = format!("{prefix}.*");
        if !self.is_empty() || current == Some(narrow.as_str()) {
            narrow
        } else {
            format!("{prefix}.>")
        }
    }

    /// A pool consumer's filter: `<prefix>.<pool>.*`.
    pub fn pool_filter(prefix: &str, pool: &PodPool) -> String {
        format!("{prefix}.{}.*", pool.name)
    }

    /// A pool's durable consumer: `<consumer>-<pool>`.
    pub fn pool_consumer(consumer: &str, pool: &PodPool) -> String {
        format!("{consumer}-{}", pool.name)
    }
}

/// The text [`PodPools::parse`] reads back: `name=t,t;name=t`, pools by
/// name and tenants sorted.
impl fmt::Display for PodPools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write!(f, "{}=", p.name)?;
            for (j, t) in p.tenants.iter().enumerate() {
                if j > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{t}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn an_empty_set_admits_everyone_and_a_set_exactly_its_tenants() {
        let all = PodTenants::all();
        assert!(all.is_all() && all.admits(id(1)) && all.admits(id(2)));
        let one = PodTenants::new("t", [id(3), id(1)]).unwrap();
        assert!(!one.is_all());
        assert_eq!(one.ids(), &[id(1), id(3)], "sorted");
        assert!(one.admits(id(1)) && one.admits(id(3)));
        assert!(!one.admits(id(2)));
    }

    #[test]
    fn a_set_refuses_duplicates_nil_junk_and_too_many_naming_the_field() {
        let dup = PodTenants::new("pod_tenant_ids", [id(1), id(1)]).unwrap_err();
        assert_eq!(
            dup,
            CoreError::invalid_argument(
                "pod_tenant_ids",
                format!("tenant {} is listed twice", id(1))
            )
        );
        assert!(matches!(
            PodTenants::new("f", [Uuid::nil()]),
            Err(CoreError::InvalidArgument { ref field, .. }) if field == "f"
        ));
        let junk = PodTenants::parse("pod_tenant_ids", &[id(1).to_string(), "acme".into()]);
        assert!(matches!(
            junk,
            Err(CoreError::InvalidArgument { ref field, .. }) if field == "pod_tenant_ids[1]"
        ));
        let many: Vec<Uuid> = (1..=MAX_POD_TENANTS as u128 + 1).map(id).collect();
        assert!(PodTenants::new("f", many[..MAX_POD_TENANTS].to_vec()).is_ok());
        assert!(PodTenants::new("f", many).is_err());
        let parsed = PodTenants::parse("f", &[id(2).to_string()]).unwrap();
        assert_eq!(parsed.ids(), &[id(2)]);
        assert!(PodTenants::parse::<String>("f", &[]).unwrap().is_all());
    }

    #[test]
    fn pool_names_are_dns_labels_and_subject_tokens() {
        for good in ["a", "eu", "acme-1", "x2y", "a-b-c"] {
            assert!(check_pool_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a.b",
            "a*",
            "a>",
            "a b",
            "a_b",
            "abcdefghijklmnopqrstu",
        ] {
            assert!(check_pool_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pools_parse_route_and_print_back() {
        let text = format!(" zeta = {} ; acme={},{} ", id(9), id(2), id(1));
        let pools = PodPools::parse(&text).unwrap();
        let names: Vec<_> = pools.pools().iter().map(PodPool::name).collect();
        assert_eq!(names, ["acme", "zeta"], "by name");
        assert_eq!(pools.pools()[0].tenants(), &[id(1), id(2)]);
        assert_eq!(
            pools.to_string(),
            format!("acme={},{};zeta={}", id(1), id(2), id(9))
        );
        assert_eq!(PodPools::parse(&pools.to_string()).unwrap(), pools);
        assert_eq!(pools.pool_of(id(2)).map(PodPool::name), Some("acme"));
        assert_eq!(pools.pool_of(id(5)), None);
        assert_eq!(
            pools.subject("genesis.ticks", id(9)),
            format!("genesis.ticks.zeta.{}", id(9))
        );
        assert_eq!(
            pools.subject("genesis.ticks", id(5)),
            format!("genesis.ticks.{}", id(5))
        );
        let acme = &pools.pools()[0];
        assert_eq!(
            PodPools::pool_filter("genesis.ticks", acme),
            "genesis.ticks.acme.*"
        );
        assert_eq!(
            PodPools::pool_consumer("agent-pods", acme),
            "agent-pods-acme"
        );
        assert!(PodPools::parse("").unwrap().is_empty());
        assert!(PodPools::parse(" ; ").unwrap().is_empty());
    }

    #[test]
    fn the_shared_filter_never_takes_a_pools_subject() {
        let none = PodPools::none();
        let some = PodPools::parse(&format!("acme={}", id(1))).unwrap();
        assert_eq!(none.shared_filter("p", None), "p.>");
        assert_eq!(none.shared_filter("p", Some("p.>")), "p.>");
        assert_eq!(none.shared_filter("p", Some("p.*")), "p.*", "left narrow");
        assert_eq!(some.shared_filter("p", None), "p.*");
        assert_eq!(some.shared_filter("p", Some("p.>")), "p.*");
        // `p.*` matches one token after the prefix; a pool's subject has two.
        let subject = some.subject("p", id(1));
        assert_eq!(subject.split('.').count(), 3);
        assert_eq!(some.subject("p", id(2)).split('.').count(), 2);
    }

    #[test]
    fn bad_pool_lists_are_refused_with_the_reason() {
        let a = id(1).to_string();
        let cases = [
            ("acme".to_owned(), "is not name=tenant"),
            ("acme=".to_owned(), "names no tenant"),
            (format!("Acme={a}"), "lower-case"),
            (format!("acme={a};acme={}", id(2)), "named twice"),
            (format!("acme={a};beta={a}"), "in two pools"),
            (format!("acme={a},{a}"), "listed twice"),
            ("acme=nope".to_owned(), "acme[0]: must be a UUID"),
        ];
        for (text, want) in cases {
            let err = PodPools::parse(&text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
        let many: Vec<String> = (1..=MAX_POD_POOLS as u128 + 1)
            .map(|n| format!("p{n}={}", id(n)))
            .collect();
        assert!(
            PodPools::parse(&many.join(";"))
                .unwrap_err()
                .contains("at most")
        );
    }
}
