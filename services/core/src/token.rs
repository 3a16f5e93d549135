//! The bearer-token rules: the text a token's random bytes are shown as,
//! what shape a minted token has, the stored form of it (lower-case SHA-256
//! hex) and the constant-time comparison of a presented token with a stored
//! hash. The one implementation: the store admits tokens with it, the wire
//! crate's auth module re-exports it for the servers and clients and draws
//! the random bytes (this crate never reads a random source: every rule here
//! is a function of its arguments). Must never store, log or look up a
//! token, and never put one into an error.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Prefix of every token this system mints, so a leaked one is recognisable
/// by secret scanners and a pasted foreign credential is rejected early.
pub const TOKEN_PREFIX: &str = "gen_";

/// Random bytes in a token (256 bits of entropy).
pub const TOKEN_BYTES: usize = 32;

/// Length of a minted token: the prefix plus unpadded base64url of
/// [`TOKEN_BYTES`] bytes.
pub const TOKEN_LEN: usize = TOKEN_PREFIX.len() + (TOKEN_BYTES * 4).div_ceil(3);

/// The token of `bytes`: `gen_` + unpadded base64url of them. The caller
/// draws the bytes from a CSPRNG (`genesis_proto::auth::generate_token`);
/// the token is shown to the operator once and only [`token_sha256`] of it
/// is stored.
pub fn token_from_bytes(bytes: [u8; TOKEN_BYTES]) -> String {
    let mut token = String::with_capacity(TOKEN_LEN);
    token.push_str(TOKEN_PREFIX);
    URL_SAFE_NO_PAD.encode_string(bytes, &mut token);
    token
}

/// Whether a string has the shape of a minted token. Lets the auth layer
/// answer `UNAUTHENTICATED` without a database round trip for garbage.
pub fn is_well_formed_token(token: &str) -> bool {
    token.len() == TOKEN_LEN
        && token
            .strip_prefix(TOKEN_PREFIX)
            .and_then(|body| URL_SAFE_NO_PAD.decode(body).ok())
            .is_some_and(|bytes| bytes.len() == TOKEN_BYTES)
}

/// SHA-256 of the token's UTF-8 bytes as lower-case hex: what `api_tokens`
/// stores and what a lookup compares. Tokens carry 256 bits of entropy, so an
/// unsalted fast hash is the right tool (no password stretching needed).
pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Compares two byte strings in time independent of where they differ, so
/// comparing a presented hash with a stored one leaks nothing through timing.
/// Different lengths compare unequal.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Whether `token` hashes to `stored_sha256_hex`, compared in constant time.
/// The stored hash is compared case-insensitively as hex.
pub fn token_matches_hash(token: &str, stored_sha256_hex: &str) -> bool {
    let presented = token_sha256(token);
    constant_time_eq(
        presented.as_bytes(),
        stored_sha256_hex.to_ascii_lowercase().as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_documented_shape_and_carry_their_bytes() {
        let bytes = [7_u8; TOKEN_BYTES];
        let a = token_from_bytes(bytes);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_LEN);
        assert_eq!(TOKEN_LEN, 47);
        assert!(is_well_formed_token(&a));
        assert_ne!(a, token_from_bytes([8_u8; TOKEN_BYTES]));
        let body = URL_SAFE_NO_PAD
            .decode(&a[TOKEN_PREFIX.len()..])
            .expect("the body is base64url");
        assert_eq!(body, bytes);
    }

    #[test]
    fn malformed_tokens_are_recognised() {
        assert!(!is_well_formed_token(""));
        assert!(!is_well_formed_token("gen_"));
        assert!(!is_well_formed_token(&format!("xyz_{}", "A".repeat(43))));
        // Right length, but '*' is not base64url.
        assert!(!is_well_formed_token(&format!("gen_{}*", "A".repeat(42))));
        // Padding is not part of the format.
        assert!(!is_well_formed_token(&format!("gen_{}=", "A".repeat(42))));
    }

    #[test]
    fn token_sha256_is_lowercase_hex_of_the_token_bytes() {
        // SHA-256("abc"), FIPS 180-2 test vector.
        assert_eq!(
            token_sha256("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(token_sha256("gen_a"), token_sha256("gen_b"));
    }

    #[test]
    fn constant_time_eq_compares_contents_and_lengths() {
        assert!(constant_time_eq(b"same", b"same"));
        assert!(!constant_time_eq(b"same", b"samf"));
        assert!(!constant_time_eq(b"same", b"sam"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn token_matches_only_its_own_hash() {
        let token = token_from_bytes([1_u8; TOKEN_BYTES]);
        let stored = token_sha256(&token);
        assert!(token_matches_hash(&token, &stored));
        assert!(token_matches_hash(&token, &stored.to_ascii_uppercase()));
        assert!(!token_matches_hash(
            &token_from_bytes([2_u8; TOKEN_BYTES]),
            &stored
        ));
        assert!(!token_matches_hash(&token, ""));
    }
}
