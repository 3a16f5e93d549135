//! A preset whose chain mixes the offline scripted provider with a real one
//! is refused by the invoker itself, before any attempt: control refuses it
//! at upsert, and the pod refuses it again, so an outage of the real
//! provider can never be answered with canned text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use genesis_llm::{
    ChatMessage, ChatRequest, CredentialRef, FallbackInvoker, HttpProviderFactory, HttpTimeouts,
    LlmError, ModelCouple, Preset, PresetError, ProviderKind, ScriptedProvider,
};

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "sys".into(),
        messages: vec![ChatMessage::user("hello")].into(),
        tools: Vec::new().into(),
        max_output_tokens: 64,
        temperature: None,
    }
}

fn real_then_scripted() -> Preset {
    Preset {
        id: "p".into(),
        name: "mixed".into(),
        model: "gpt-4o".into(),
        provider: ProviderKind::OpenAi,
        backend: String::new(),
        credentials: vec![CredentialRef::new("OPENAI_API_KEY", "sk-test")],
        fallback: vec![ModelCouple::new("scripted-1", ProviderKind::Scripted, "")],
        overlays: Default::default(),
    }
}

#[test]
fn a_chain_mixing_scripted_with_a_real_provider_is_invalid() {
    let err = real_then_scripted().validate().expect_err("mixed");
    assert!(matches!(err, PresetError::MixedChain(_)), "{err:?}");
    assert!(err.to_string().contains("scripted"), "{err}");
    // Either way round.
    let mut p = Preset::scripted("s");
    p.fallback = vec![ModelCouple::new("gpt-4o", ProviderKind::OpenAi, "")];
    p.credentials = vec![CredentialRef::new("OPENAI_API_KEY", "sk-test")];
    assert!(matches!(p.validate(), Err(PresetError::MixedChain(_))));
    // All scripted stays valid.
    assert!(Preset::scripted("s").validate().is_ok());
}

#[tokio::test]
async fn the_invoker_refuses_a_mixed_chain_before_any_attempt() {
    let scripted = Arc::new(ScriptedProvider::new());
    let factory = HttpProviderFactory::new(HttpTimeouts::default())
        .unwrap()
        .with_scripted(scripted.clone());
    let invoker = FallbackInvoker::new(Arc::new(factory));
    let err = invoker
        .invoke(&real_then_scripted(), request())
        .await
        .expect_err("refused");
    assert!(
        matches!(err.error, LlmError::InvalidRequest { .. }),
        "{err:?}"
    );
    assert!(
        err.attempts.is_empty(),
        "nothing was tried: {:?}",
        err.attempts
    );
    assert_eq!(scripted.calls(), 0, "the scripted provider never answered");
}
