//! A minimal OTLP receiver for the export tests: it records what the
//! exporters send and answers like a collector, so the tests check the bytes
//! that leave the process, decoded with the OTLP protobuf definitions.

#![allow(dead_code)] // each test file uses the part it needs

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

/// Every request body the receiver decoded, by signal.
#[derive(Default, Clone)]
pub struct Received {
    pub traces: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    pub metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
}

/// A span as exported: its service, name and string attributes.
#[derive(Debug, Clone)]
pub struct SeenSpan {
    pub service_name: Option<String>,
    pub name: String,
    pub attributes: Vec<(String, String)>,
}

/// One data point of a sum as exported.
#[derive(Debug, Clone)]
pub struct SeenPoint {
    pub service_name: Option<String>,
    pub resource: Vec<(String, String)>,
    pub metric: String,
    pub value: i64,
    pub attributes: Vec<(String, String)>,
}

/// One data point of a gauge as exported (integer gauges as `f64`).
#[derive(Debug, Clone)]
pub struct SeenGauge {
    pub service_name: Option<String>,
    pub metric: String,
    pub attributes: Vec<(String, String)>,
    pub value: f64,
}

fn strings(attrs: &[KeyValue]) -> Vec<(String, String)> {
    attrs
        .iter()
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some((kv.key.clone(), s.clone())),
            _ => None,
        })
        .collect()
}

fn service_name(resource: Option<&Resource>) -> Option<String> {
    let attrs = strings(&resource?.attributes);
    attrs
        .into_iter()
        .find(|(k, _)| k == "service.name")
        .map(|(_, v)| v)
}

impl Received {
    pub fn spans(&self) -> Vec<SeenSpan> {
        let traces = self.traces.lock().unwrap();
        let mut out = Vec::new();
        for request in traces.iter() {
            for rs in &request.resource_spans {
                for ss in &rs.scope_spans {
                    for span in &ss.spans {
                        out.push(SeenSpan {
                            service_name: service_name(rs.resource.as_ref()),
                            name: span.name.clone(),
                            attributes: strings(&span.attributes),
                        });
                    }
                }
            }
        }
        out
    }

    pub fn sum_points(&self) -> Vec<SeenPoint> {
        let metrics = self.metrics.lock().unwrap();
        let mut out = Vec::new();
        for request in metrics.iter() {
            for rm in &request.resource_metrics {
                for sm in &rm.scope_metrics {
                    for m in &sm.metrics {
                        let Some(metric::Data::Sum(sum)) = &m.data else {
                            continue;
                        };
                        for p in &sum.data_points {
                            let value = match p.value {
                                Some(number_data_point::Value::AsInt(v)) => v,
                                Some(number_data_point::Value::AsDouble(v)) => v as i64,
                                None => continue,
                            };
                            out.push(SeenPoint {
                                service_name: service_name(rm.resource.as_ref()),
                                resource: rm
                                    .resource
                                    .as_ref()
                                    .map(|r| strings(&r.attributes))
                                    .unwrap_or_default(),
                                metric: m.name.clone(),
                                value,
                                attributes: strings(&p.attributes),
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// Every gauge point, in export order (the last one of a series is its
    /// latest value).
    pub fn gauge_points(&self) -> Vec<SeenGauge> {
        let metrics = self.metrics.lock().unwrap();
        let mut out = Vec::new();
        for request in metrics.iter() {
            for rm in &request.resource_metrics {
                for sm in &rm.scope_metrics {
                    for m in &sm.metrics {
                        let Some(metric::Data::Gauge(gauge)) = &m.data else {
                            continue;
                        };
                        for p in &gauge.data_points {
                            let value = match p.value {
                                Some(number_data_point::Value::AsInt(v)) => v as f64,
                                Some(number_data_point::Value::AsDouble(v)) => v,
                                None => continue,
                            };
                            out.push(SeenGauge {
                                service_name: service_name(rm.resource.as_ref()),
                                metric: m.name.clone(),
                                attributes: strings(&p.attributes),
                                value,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// Wait until `check` holds (polling), or fail after `within`.
    pub async fn wait_for(&self, within: Duration, what: &str, check: impl Fn(&Received) -> bool) {
        let deadline = tokio::time::Instant::now() + within;
        while !check(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn traces(State(r): State<Received>, body: Bytes) -> &'static str {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace request body");
    r.traces.lock().unwrap().push(request);
    ""
}

async fn metrics(State(r): State<Received>, body: Bytes) -> &'static str {
    let request = ExportMetricsServiceRequest::decode(body).expect("an OTLP metrics request body");
    r.metrics.lock().unwrap().push(request);
    ""
}

/// Serve OTLP/HTTP (`POST /v1/traces`, `POST /v1/metrics`, 200 with an empty
/// body) on a loopback port.
pub async fn start_http_receiver() -> (SocketAddr, Received) {
    let received = Received::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .route("/v1/metrics", post(metrics))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, received)
}

mod grpc {
    use super::Received;
    use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::MetricsService;
    use opentelemetry_proto::tonic::collector::metrics::v1::{
        ExportMetricsServiceRequest, ExportMetricsServiceResponse,
    };
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService;
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use tonic::{Request, Response, Status};

    #[tonic::async_trait]
    impl TraceService for Received {
        async fn export(
            &self,
            request: Request<ExportTraceServiceRequest>,
        ) -> Result<Response<ExportTraceServiceResponse>, Status> {
            self.traces.lock().unwrap().push(request.into_inner());
            Ok(Response::new(ExportTraceServiceResponse::default()))
        }
    }

    #[tonic::async_trait]
    impl MetricsService for Received {
        async fn export(
            &self,
            request: Request<ExportMetricsServiceRequest>,
        ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
            self.metrics.lock().unwrap().push(request.into_inner());
            Ok(Response::new(ExportMetricsServiceResponse::default()))
        }
    }
}

/// Serve OTLP/gRPC (the trace and metrics collector services) on a loopback
/// port.
pub async fn start_grpc_receiver() -> (SocketAddr, Received) {
    use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::MetricsServiceServer;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;

    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(received.clone()))
        .add_service(MetricsServiceServer::new(received.clone()));
    tokio::spawn(async move {
        server.serve_with_incoming(incoming).await.unwrap();
    });
    (addr, received)
}
