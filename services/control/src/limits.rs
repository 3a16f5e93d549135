//! Per-tenant rate limits of the admin surface (gRPC and dashboard): one
//! token bucket per tenant for every admin call, and a tighter one for the
//! calls that enqueue work for an agent (operator messages, answers, starts,
//! resets, signals, mission and task settlements). A platform-wide token is
//! limited as its own key. The bucket rule is genesis-core's; this module owns
//! the shared maps. Must never block on I/O while holding a map lock.

use std::sync::Mutex;
use std::time::Instant;

use genesis_core::rate::{Buckets, Rate};
use tonic::Status;
use tonic::metadata::MetadataValue;

use crate::auth::Caller;
use crate::config::ControlConfig;

/// Past this many tracked keys, fully refilled buckets are swept.
const SWEEP_ABOVE: usize = 4096;

/// RPCs that enqueue an event for an agent (or settle what wakes one).
pub const ENQUEUE_METHODS: &[&str] = &[
    "/genesis.v1.AgentService/SendMessage",
    "/genesis.v1.AgentService/StartAgent",
    "/genesis.v1.AgentService/ResetAgent",
    "/genesis.v1.AgentService/StartCompliance",
    "/genesis.v1.AgentService/RaiseRedactorSignal",
    "/genesis.v1.AgentService/ReplayTurn",
    "/genesis.v1.DecisionService/RespondDecision",
    "/genesis.v1.MissionService/SetMissionStatus",
    "/genesis.v1.CodingTaskService/CompleteTask",
];

/// Which bucket a call draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Every admin call.
    Admin,
    /// An admin call that also enqueues (draws from both buckets).
    Enqueue,
}

impl Class {
    /// The class of a gRPC method path.
    pub fn of(path: &str) -> Class {
        if ENQUEUE_METHODS.contains(&path) {
            Class::Enqueue
        } else {
            Class::Admin
        }
    }
}

/// The two limiters of one control process.
#[derive(Debug)]
pub struct RateLimits {
    admin: Mutex<Buckets<String>>,
    enqueue: Mutex<Buckets<String>>,
    admin_rate: Rate,
    enqueue_rate: Rate,
}

impl RateLimits {
    /// From `GENESIS_ADMIN_RATE_*` and `GENESIS_ENQUEUE_RATE_*`.
    pub fn from_config(c: &ControlConfig) -> Self {
        let admin_rate = Rate {
            per_second: c.admin_rate_per_sec,
            burst: c.admin_rate_burst,
        };
        let enqueue_rate = Rate {
            per_second: c.enqueue_rate_per_sec,
            burst: c.enqueue_rate_burst,
        };
        RateLimits {
            admin: Mutex::new(Buckets::new(admin_rate)),
            enqueue: Mutex::new(Buckets::new(enqueue_rate)),
            admin_rate,
            enqueue_rate,
        }
    }

    /// Take a token for `caller` (keyed by tenant, or by token when
    /// platform-wide), or answer RESOURCE_EXHAUSTED with `retry-after-ms`.
    pub fn check(&self, caller: &Caller, class: Class) -> Result<(), Status> {
        let key = match caller.tenant_id {
            Some(t) => t.to_string(),
            None => format!("platform:{}", caller.token_id),
        };
        let now = Instant::now();
        take(&self.admin, &key, now, self.admin_rate, "admin calls")?;
        if class == Class::Enqueue {
            take(&self.enqueue, &key, now, self.enqueue_rate, "enqueues")?;
        }
        Ok(())
    }
}

fn take(
    buckets: &Mutex<Buckets<String>>,
    key: &String,
    now: Instant,
    rate: Rate,
    what: &str,
) -> Result<(), Status> {
    let outcome = {
        // A poisoned lock only means another request panicked mid-update;
        // the bucket numbers are still usable.
        let mut b = buckets.lock().unwrap_or_else(|p| p.into_inner());
        if b.len() > SWEEP_ABOVE {
            b.sweep(now);
        }
        b.take(key, now)
    };
    outcome.map_err(|wait| {
        let ms = wait.as_millis().max(1);
        let mut s = Status::resource_exhausted(format!(
            "rate limit: {what} are limited to {}/s (burst {}) per tenant; retry in {ms} ms",
            rate.per_second, rate.burst
        ));
        if let Ok(v) = MetadataValue::try_from(ms.to_string()) {
            s.metadata_mut().insert("retry-after-ms", v);
        }
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn caller(t: Option<Uuid>) -> Caller {
        Caller {
            token_id: Uuid::new_v4(),
            tenant_id: t,
            label: String::new(),
        }
    }

    #[test]
    fn enqueues_draw_from_their_own_tighter_bucket() {
        let mut c = ControlConfig::new("postgres://h/d", "nats://h");
        c.admin_rate_per_sec = 100.0;
        c.admin_rate_burst = 100.0;
        c.enqueue_rate_per_sec = 1.0;
        c.enqueue_rate_burst = 2.0;
        let l = RateLimits::from_config(&c);
        let a = caller(Some(Uuid::new_v4()));
        assert!(l.check(&a, Class::Enqueue).is_ok());
        assert!(l.check(&a, Class::Enqueue).is_ok());
        let e = l.check(&a, Class::Enqueue).expect_err("third enqueue");
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("enqueues"), "{}", e.message());
        assert!(e.metadata().get("retry-after-ms").is_some());
        assert!(l.check(&a, Class::Admin).is_ok(), "reads still pass");
        let b = caller(Some(Uuid::new_v4()));
        assert!(
            l.check(&b, Class::Enqueue).is_ok(),
            "another tenant is unaffected"
        );
    }

    #[test]
    fn method_classes() {
        assert_eq!(
            Class::of("/genesis.v1.AgentService/SendMessage"),
            Class::Enqueue
        );
        assert_eq!(
            Class::of("/genesis.v1.AgentService/ListAgents"),
            Class::Admin
        );
    }
}
