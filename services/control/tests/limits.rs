//! Control's whole-request size limit (`genesis_control::server::
//! MAX_REQUEST_BYTES`): a request one byte over it is refused from its frame
//! header with tonic's status and writes nothing; a request exactly at it is
//! decoded and judged by the service; and the largest legitimate request (a
//! source file at the store's ceiling) fits under it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use genesis_control::server::MAX_REQUEST_BYTES;
use genesis_core::TokenScope;
use genesis_proto::raw::RawCodec;
use genesis_proto::v1;
use genesis_proto::v1::knowledge_service_client::KnowledgeServiceClient;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

const INGEST_SOURCE_FILE: &str = "/genesis.v1.KnowledgeService/IngestSourceFile";

/// What an ingest could write to.
async fn rows(pool: &PgPool) -> (i64, i64) {
    let n = |table: &'static str| genesis_store::inspect::count_rows(pool, table);
    (
        n("source_files").await.unwrap(),
        n("knowledge_documents").await.unwrap(),
    )
}

struct Fixture {
    h: Harness,
    channel: tonic::transport::Channel,
    tenant: Uuid,
    op: String,
}

async fn fixture(pool: &PgPool) -> Fixture {
    let store = store(pool);
    let tenant = store.tenants().create("limits").await.unwrap().id;
    let op = token(&store, TokenScope::Operator, Some(tenant))
        .await
        .unwrap();
    let mut cfg = config(pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await.unwrap();
    let channel = h.channel().await.unwrap();
    Fixture {
        h,
        channel,
        tenant,
        op,
    }
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn string_field(field: u64, data: &[u8], out: &mut Vec<u8>) {
    varint(field << 3 | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

/// An IngestSourceFileRequest of the caller's tenant whose `content` pads
/// the encoded message to exactly `total` bytes.
fn ingest_of_size(tenant: Uuid, total: usize) -> Vec<u8> {
    let mut prefix = Vec::new();
    string_field(1, tenant.to_string().as_bytes(), &mut prefix);
    string_field(2, b"src/big.rs", &mut prefix);
    let overhead = |n: usize| {
        let mut v = Vec::new();
        varint(n as u64, &mut v);
        prefix.len() + 1 + v.len()
    };
    let mut n = total - overhead(0);
    while overhead(n) + n > total {
        n -= 1;
    }
    let mut body = prefix.clone();
    string_field(3, &vec![b'/'; n], &mut body);
    assert_eq!(body.len(), total);
    body
}

async fn send_raw(
    f: &Fixture,
    path: &str,
    body: Vec<u8>,
) -> Result<tonic::Response<Vec<u8>>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(f.channel.clone());
    grpc.ready().await.unwrap();
    grpc.unary(
        req(body, &f.op),
        http::uri::PathAndQuery::try_from(path.to_owned()).unwrap(),
        RawCodec,
    )
    .await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_request_one_byte_over_the_limit_is_refused_before_decoding_and_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let f = fixture(&pool).await;
    let before = rows(&pool).await;
    let err = send_raw(
        &f,
        INGEST_SOURCE_FILE,
        ingest_of_size(f.tenant, MAX_REQUEST_BYTES + 1),
    )
    .await
    .expect_err("an oversized request is refused");
    // tonic 0.14 answers an over-limit frame with OUT_OF_RANGE (not the
    // RESOURCE_EXHAUSTED of the gRPC status-code table) and names the limit.
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert!(
        err.message().contains("decoded message length too large")
            && err
                .message()
                .contains(&format!("the limit is: {MAX_REQUEST_BYTES} bytes")),
        "{}",
        err.message()
    );
    assert_eq!(rows(&pool).await, before, "nothing was written");
    // The server survives and the same channel still serves a normal ingest.
    let mut health = tonic_health::pb::health_client::HealthClient::new(f.channel.clone());
    health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await?;
    KnowledgeServiceClient::new(f.channel.clone())
        .ingest_source_file(req(
            v1::IngestSourceFileRequest {
                tenant_id: f.tenant.to_string(),
                path: "src/small.rs".into(),
                content: "fn main() {}".into(),
                language: String::new(),
                project_id: String::new(),
            },
            &f.op,
        ))
        .await?;
    assert_eq!(rows(&pool).await.0, before.0 + 1);
    f.h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_request_exactly_at_the_limit_is_decoded_and_judged_by_the_service(
    pool: PgPool,
) -> anyhow::Result<()> {
    let f = fixture(&pool).await;
    let before = rows(&pool).await;
    let err = send_raw(
        &f,
        INGEST_SOURCE_FILE,
        ingest_of_size(f.tenant, MAX_REQUEST_BYTES),
    )
    .await
    .expect_err("a file this large is refused by the store");
    // The store's own refusal, naming the field: the message was decoded.
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("content")
            && err.message().contains(&format!(
                "must be at most {} bytes",
                genesis_store::knowledge::MAX_FILE_BYTES
            )),
        "{}",
        err.message()
    );
    assert_eq!(rows(&pool).await, before, "nothing was written");
    f.h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_largest_source_file_the_store_accepts_is_within_the_limit(
    pool: PgPool,
) -> anyhow::Result<()> {
    let f = fixture(&pool).await;
    let before = rows(&pool).await;
    let doc = KnowledgeServiceClient::new(f.channel.clone())
        .ingest_source_file(req(
            v1::IngestSourceFileRequest {
                tenant_id: f.tenant.to_string(),
                path: "src/largest.rs".into(),
                content: "/".repeat(genesis_store::knowledge::MAX_FILE_BYTES),
                language: String::new(),
                project_id: String::new(),
            },
            &f.op,
        ))
        .await
        .expect("a file at the store's ceiling is accepted")
        .into_inner();
    assert_eq!(
        doc.size_bytes,
        i64::try_from(genesis_store::knowledge::MAX_FILE_BYTES)?
    );
    assert_eq!(rows(&pool).await.0, before.0 + 1);
    f.h.stop().await
}
