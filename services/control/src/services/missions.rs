//! `genesis.v1.MissionService`: the operator's view of the missions a SOA
//! proposed (`soa_propose_task`) and the status change that wakes the
//! steering instance with `MissionStateChanged`. The store updates the
//! mission and enqueues the event in one transaction. Must never write a
//! mission or an event except through `genesis_store::missions`, and never
//! answer for a tenant the caller is not bound to.

use genesis_proto::convert::timestamp_from_chrono;
use genesis_proto::v1::{self, mission_service_server::MissionService};
use genesis_store::missions::{MissionFilter, MissionRow, MissionStatus};
use tonic::{Request, Response, Status};

use super::{observe, record_ids};
use crate::auth::caller;
use crate::state::AppState;
use crate::status::{opt_uuid, parse_enum, parse_opt_enum, store_status, uuid};

/// The service.
#[derive(Clone)]
pub struct Missions {
    state: AppState,
}

impl Missions {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// Mission row → wire `Mission`.
pub fn mission(m: &MissionRow) -> v1::Mission {
    v1::Mission {
        id: m.id.to_string(),
        tenant_id: m.tenant_id.to_string(),
        title: m.title.clone(),
        description: m.description.clone(),
        kind: m.kind.clone(),
        status: m.status.as_str().to_owned(),
        steering_instance_id: m.steering_instance_id.map(|i| i.to_string()),
        created_at: Some(timestamp_from_chrono(m.created_at)),
        updated_at: Some(timestamp_from_chrono(m.updated_at)),
    }
}

#[tonic::async_trait]
impl MissionService for Missions {
    async fn list_missions(
        &self,
        request: Request<v1::ListMissionsRequest>,
    ) -> Result<Response<v1::ListMissionsResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.MissionService/ListMissions",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let status: Option<MissionStatus> =
                    parse_opt_enum("status", req.status.as_deref())?;
                let instance = opt_uuid("instance_id", req.instance_id.as_deref())?;
                record_ids(t, instance);
                let rows = self
                    .state
                    .store
                    .missions()
                    .list(
                        t,
                        MissionFilter {
                            status,
                            steering_instance_id: instance,
                        },
                    )
                    .await
                    .map_err(store_status)?;
                Ok(v1::ListMissionsResponse {
                    missions: rows.iter().map(mission).collect(),
                })
            },
        )
        .await
    }

    async fn get_mission(
        &self,
        request: Request<v1::GetMissionRequest>,
    ) -> Result<Response<v1::Mission>, Status> {
        observe(
            &self.state,
            "/genesis.v1.MissionService/GetMission",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("mission_id", &req.mission_id)?;
                record_ids(t, None);
                let row = self
                    .state
                    .store
                    .missions()
                    .get(t, id)
                    .await
                    .map_err(store_status)?;
                Ok(mission(&row))
            },
        )
        .await
    }

    async fn set_mission_status(
        &self,
        request: Request<v1::SetMissionStatusRequest>,
    ) -> Result<Response<v1::Mission>, Status> {
        observe(
            &self.state,
            "/genesis.v1.MissionService/SetMissionStatus",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("mission_id", &req.mission_id)?;
                let to: MissionStatus = parse_enum("status", &req.status)?;
                record_ids(t, None);
                let change = self
                    .state
                    .store
                    .missions()
                    .set_status(t, id, to)
                    .await
                    .map_err(store_status)?;
                if let Some(ev) = &change.event {
                    tracing::info!(
                        mission = %change.mission.id,
                        instance = %ev.instance_id,
                        event = %ev.id,
                        "mission status changed; MissionStateChanged enqueued"
                    );
                }
                Ok(mission(&change.mission))
            },
        )
        .await
    }
}
