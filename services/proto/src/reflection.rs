//! gRPC server reflection as both servers serve it: v1 and v1alpha (older
//! grpcurl, Postman and Evans releases speak only v1alpha), listing exactly
//! the services a server answers plus the open ones ([`OPEN_SERVICES`]),
//! and resolving no symbol of a service it does not answer. Reflection and
//! health are open paths ([`is_open_path`]): probes and tools reach them
//! without a token. Must never list or describe a service the server does
//! not serve.

use tonic_reflection::server::{v1, v1alpha};

use prost::Message as _;
use prost_types::FileDescriptorSet;

use crate::convert::descriptor_set_serving;

/// The services every server lists beside its own: health and reflection
/// itself in both versions.
pub const OPEN_SERVICES: &[&str] = &[
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// Whether `path` belongs to a service served without a token: health
/// checks and reflection.
pub fn is_open_path(path: &str) -> bool {
    OPEN_SERVICES.iter().any(|service| {
        path.strip_prefix('/')
            .and_then(|p| p.strip_prefix(service))
            .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// The reflection services (v1, v1alpha) of a server answering `served`
/// (fully qualified service names) and the [`OPEN_SERVICES`].
pub fn services(
    served: &[&str],
) -> Result<
    (
        v1::ServerReflectionServer<impl v1::ServerReflection + use<>>,
        v1alpha::ServerReflectionServer<impl v1alpha::ServerReflection + use<>>,
    ),
    tonic_reflection::server::Error,
> {
    let files = FileDescriptorSet::decode(descriptor_set_serving(served).as_slice())
        .map_err(tonic_reflection::server::Error::DecodeError)?;
    let builder = || {
        let b = tonic_reflection::server::Builder::configure()
            .register_file_descriptor_set(files.clone())
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(
                tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
            );
        served
            .iter()
            .chain(OPEN_SERVICES)
            .fold(b, |b, name| b.with_service_name(*name))
    };
    Ok((builder().build_v1()?, builder().build_v1alpha()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_health_and_reflection_are_open() {
        assert!(is_open_path("/grpc.health.v1.Health/Check"));
        assert!(is_open_path(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
        ));
        assert!(is_open_path(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
        ));
        assert!(!is_open_path("/grpc.health.v1.HealthX/Check"));
        assert!(!is_open_path("grpc.health.v1.Health/Check"));
        assert!(!is_open_path("/genesis.v1.AgentPod/ClaimTick"));
        assert!(!is_open_path("/genesis.v1.TenantService/ListTenants"));
    }
}
