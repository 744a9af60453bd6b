//! A client's key: what a request presents (`Authorization: Bearer`, or
//! `x-api-key`) and the SHA-256 it is known by. The configuration names
//! keys by their hashes only, and a request's key is hashed once, for
//! every check that goes by it.

use axum::http::{header, HeaderMap};
use sha2::{Digest, Sha256};

/// The SHA-256 (hex) a client key is configured by, so the configuration
/// never holds a key itself.
#[must_use]
pub fn key_hash(key: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    Sha256::digest(key.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, &b| {
            hex.push(char::from(HEX[usize::from(b >> 4)]));
            hex.push(char::from(HEX[usize::from(b & 0x0f)]));
            hex
        })
}

/// The SHA-256 (hex) of the key a request presents, if it presents one:
/// taken once a request, for every check that goes by the key (is it
/// one of the client keys, its conversations' scope, its share of the
/// limits).
pub(super) fn presented_key_hash(headers: &HeaderMap) -> Option<String> {
    presented_key(headers).map(key_hash)
}

/// The short name a client goes by in the gateway's own records (its
/// conversations, its share of the limits): the first 16 hex digits of
/// its key's SHA-256 `hash`.
pub(super) fn key_tag(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}

/// The key a request presents (`Authorization: Bearer`, or `x-api-key`).
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|key| !key.is_empty())
}

/// Whether `headers` present the key of SHA-256 `hash`.
pub(super) fn presents_key(headers: &HeaderMap, hash: &str) -> bool {
    presented_key(headers).is_some_and(|key| key_hash(key) == hash)
}

#[cfg(test)]
mod tests {
    use super::key_hash;

    #[test]
    fn a_key_is_configured_by_its_sha256_in_lower_hex() {
        // FIPS 180-2's test vector for "abc", and the empty string's digest.
        assert_eq!(
            key_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            key_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
