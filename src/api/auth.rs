//! API-key authentication: `Authorization: Bearer <key>`, `X-API-Key: <key>`, or
//! `Authorization: Bearer <JWT>` signed HS256 with the key and carrying a valid `exp`
//! (what the `hyper-connect` client sends). Every failure gets the same 401.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::config::ApiKey;

/// Clock skew tolerated on a JWT's `exp`, in seconds.
const JWT_LEEWAY_SECS: u64 = 60;

pub async fn require_api_key(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    match &state.config.api_key {
        Some(key) if !is_authorized(request.headers(), key) => Err(ApiError::Unauthorized),
        _ => Ok(next.run(request).await),
    }
}

/// The /admin routes: the admin key when one is set, else the API key.
pub async fn require_admin_key(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    match state.config.admin_key() {
        Some(key) if !is_authorized(request.headers(), key) => Err(ApiError::Unauthorized),
        _ => Ok(next.run(request).await),
    }
}

pub fn is_authorized(headers: &HeaderMap, key: &ApiKey) -> bool {
    let key = key.expose().as_bytes();
    if let Some(given) = headers.get("x-api-key")
        && constant_time_eq(given.as_bytes(), key)
    {
        return true;
    }
    let Some(token) = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
    else {
        return false;
    };
    constant_time_eq(token.as_bytes(), key) || valid_jwt(token, key)
}

fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// An HS256 JWT signed with the key, with an `exp` in the future (within the leeway).
/// The algorithm is pinned: `none` and every other `alg` are refused.
fn valid_jwt(token: &str, key: &[u8]) -> bool {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = JWT_LEEWAY_SECS;
    validation.validate_exp = true;
    validation.validate_aud = false;
    validation.set_required_spec_claims(&["exp"]);
    jsonwebtoken::decode::<serde_json::Value>(token, &DecodingKey::from_secret(key), &validation)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const KEY: &str = "test-api-key-0123456789";

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    fn jwt(alg: Algorithm, key: &str, exp_offset_secs: i64) -> String {
        let exp = jsonwebtoken::get_current_timestamp() as i64 + exp_offset_secs;
        jsonwebtoken::encode(
            &Header::new(alg),
            &json!({ "sub": "app", "exp": exp }),
            &EncodingKey::from_secret(key.as_bytes()),
        )
        .unwrap()
    }

    #[test]
    fn accepts_the_key_as_bearer_or_x_api_key() {
        let key = ApiKey::new(KEY.into());
        assert!(is_authorized(
            &headers("authorization", &format!("Bearer {KEY}")),
            &key
        ));
        assert!(is_authorized(
            &headers("authorization", &format!("bearer {KEY}")),
            &key
        ));
        assert!(is_authorized(&headers("x-api-key", KEY), &key));
        assert!(!is_authorized(&headers("x-api-key", "wrong"), &key));
        assert!(!is_authorized(&headers("authorization", KEY), &key));
        assert!(!is_authorized(&HeaderMap::new(), &key));
    }

    #[test]
    fn accepts_a_fresh_hs256_jwt_signed_with_the_key() {
        let key = ApiKey::new(KEY.into());
        let ok = jwt(Algorithm::HS256, KEY, 300);
        assert!(is_authorized(
            &headers("authorization", &format!("Bearer {ok}")),
            &key
        ));
        let skewed = jwt(Algorithm::HS256, KEY, -30);
        assert!(is_authorized(
            &headers("authorization", &format!("Bearer {skewed}")),
            &key
        ));
    }

    #[test]
    fn refuses_expired_foreign_or_other_algorithm_jwts() {
        let key = ApiKey::new(KEY.into());
        for token in [
            jwt(Algorithm::HS256, KEY, -120),
            jwt(Algorithm::HS256, "another-key-entirely", 300),
            jwt(Algorithm::HS512, KEY, 300),
        ] {
            assert!(!is_authorized(
                &headers("authorization", &format!("Bearer {token}")),
                &key
            ));
        }
        // alg "none": header {"alg":"none"}, no signature.
        let none = "eyJhbGciOiJub25lIn0.eyJleHAiOjQxMDI0NDQ4MDB9.";
        assert!(!is_authorized(
            &headers("authorization", &format!("Bearer {none}")),
            &key
        ));
        // A token without exp.
        let no_exp = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &json!({ "sub": "app" }),
            &EncodingKey::from_secret(KEY.as_bytes()),
        )
        .unwrap();
        assert!(!is_authorized(
            &headers("authorization", &format!("Bearer {no_exp}")),
            &key
        ));
    }
}
