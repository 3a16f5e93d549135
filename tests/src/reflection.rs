//! A gRPC reflection client for the tests of both servers: one request
//! (list the services, or find the file of a symbol) through v1 or v1alpha,
//! and what it answered. Must never be more than a client: what a server
//! lists is for the test to judge.

use tonic::transport::Channel;

/// What one reflection request answers, through v1 or v1alpha: the
/// services listed, or `["<n> files"]` for a symbol found; `Err` with
/// the server's error message or status (a symbol it does not know is
/// answered with NOT_FOUND).
pub async fn reflect(
    channel: Channel,
    v1alpha: bool,
    symbol: Option<&str>,
) -> anyhow::Result<Result<Vec<String>, String>> {
    if v1alpha {
        reflect_v1alpha(channel, symbol).await
    } else {
        reflect_v1(channel, symbol).await
    }
}

/// [`reflect`] through one version of the protocol: the two generated
/// modules have the same types under the same names, so one body serves
/// both.
macro_rules! reflect_through {
    ($name:ident, $version:ident) => {
        async fn $name(
            channel: Channel,
            symbol: Option<&str>,
        ) -> anyhow::Result<Result<Vec<String>, String>> {
            use tokio_stream::StreamExt as _;
            use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
            use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
            use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;
            use tonic_reflection::pb::$version::*;
            let request = ServerReflectionRequest {
                host: String::new(),
                message_request: Some(match symbol {
                    Some(s) => MessageRequest::FileContainingSymbol(s.into()),
                    None => MessageRequest::ListServices(String::new()),
                }),
            };
            let mut answers = ServerReflectionClient::new(channel)
                .server_reflection_info(tokio_stream::iter([request]))
                .await?
                .into_inner();
            // A symbol it does not know is answered with a NOT_FOUND status.
            let answer = match answers
                .next()
                .await
                .ok_or_else(|| anyhow::anyhow!("no answer"))?
            {
                Ok(answer) => answer,
                Err(status) => {
                    return Ok(Err(format!("{:?}: {}", status.code(), status.message())));
                }
            };
            Ok(match answer.message_response {
                Some(MessageResponse::ListServicesResponse(l)) => {
                    Ok(l.service.into_iter().map(|s| s.name).collect())
                }
                Some(MessageResponse::FileDescriptorResponse(f)) => {
                    Ok(vec![format!("{} files", f.file_descriptor_proto.len())])
                }
                Some(MessageResponse::ErrorResponse(e)) => Err(e.error_message),
                other => anyhow::bail!("unexpected answer {other:?}"),
            })
        }
    };
}

reflect_through!(reflect_v1, v1);
reflect_through!(reflect_v1alpha, v1alpha);
