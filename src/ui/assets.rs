//! The UI's static files, compiled into the binary: htmx 2.0.11 (0BSD, `htmx.LICENSE`), the
//! UI's own script (`hookq.js`: confirmations with counts, selections) and the stylesheet. Served under `/ui/assets/`, named with a content hash so browsers may
//! cache them for a year and still never run an old copy after an upgrade.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

const HTMX: &[u8] = include_bytes!("assets/htmx.min.js");
const SCRIPT: &[u8] = include_bytes!("assets/hookq.js");
const STYLESHEET: &[u8] = include_bytes!("assets/hookq.css");

struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    /// `name` with the first 10 hex digits of the content's SHA-256: `htmx.min.3f2a….js`.
    hashed: String,
}

static ASSETS: LazyLock<[Asset; 3]> = LazyLock::new(|| {
    [
        asset("htmx.min.js", "text/javascript; charset=utf-8", HTMX),
        asset("hookq.js", "text/javascript; charset=utf-8", SCRIPT),
        asset("hookq.css", "text/css; charset=utf-8", STYLESHEET),
    ]
});

fn asset(name: &'static str, content_type: &'static str, bytes: &'static [u8]) -> Asset {
    let digest = hex::encode(Sha256::digest(bytes));
    let (stem, extension) = name.rsplit_once('.').unwrap_or((name, ""));
    Asset {
        name,
        content_type,
        bytes,
        hashed: format!("{stem}.{}.{extension}", &digest[..10]),
    }
}

/// The URL of an asset by its plain name (`htmx.min.js`).
pub fn url(name: &str) -> String {
    let hashed = ASSETS
        .iter()
        .find(|a| a.name == name)
        .map_or(name, |a| a.hashed.as_str());
    format!("/ui/assets/{hashed}")
}

/// `GET /ui/assets/{file}`: only the hashed names exist.
pub async fn serve(Path(file): Path<String>) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.hashed == file) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(asset.content_type)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
        ],
        asset.bytes,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_urls_carry_their_content_hash() {
        let htmx = url("htmx.min.js");
        assert!(htmx.starts_with("/ui/assets/htmx.min.") && htmx.ends_with(".js"));
        assert_eq!(htmx.len(), "/ui/assets/htmx.min..js".len() + 10);
        assert!(url("hookq.css").ends_with(".css"));
        assert!(
            url("hookq.js").starts_with("/ui/assets/hookq.") && url("hookq.js").ends_with(".js")
        );
    }
}
