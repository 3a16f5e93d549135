//! RenewLease: extends the lease a claimed session holds. Owns only the
//! expiry answered (now plus the lease TTL, as
//! this supervisor computes it, not read back). Must never renew a lease
//! the session no longer holds or that has expired: the store refuses both
//! with LEASE_LOST and writes nothing.

use chrono::Utc;
use genesis_proto::convert::timestamp_from_chrono;
use genesis_proto::v1 as pb;
use tonic::Status;

use super::model::RenewLease;
use super::{AgentPodService, status_of};

impl AgentPodService {
    pub(super) async fn renew(&self, req: RenewLease) -> Result<pb::RenewLeaseResponse, Status> {
        let (tenant_id, instance_id, session) = req.ids.triple();
        self.store
            .renew_lease(tenant_id, instance_id, session, self.settings.lease_ttl)
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        let expires = chrono::Duration::from_std(self.settings.lease_ttl)
            .ok()
            .map(|d| Utc::now() + d);
        Ok(pb::RenewLeaseResponse {
            lease_expires_at: expires.map(timestamp_from_chrono),
        })
    }
}
