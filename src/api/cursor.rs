//! Pagination cursors: where a page ended, opaque to clients (base64url of the position).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::error::{ApiError, ApiResult};
use crate::model::JobId;
use crate::store::Position;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// After this id (listings in id order: READY jobs).
    Ready(JobId),
    /// After this failure time and id (listings in failure order: dead letters).
    Error(Position),
}

impl Cursor {
    pub fn encode(self) -> String {
        match self {
            Self::Ready(id) => URL_SAFE_NO_PAD.encode(id.as_bytes()),
            Self::Error(position) => {
                let mut bytes = position.failed_at.to_be_bytes().to_vec();
                bytes.extend_from_slice(position.id.as_bytes());
                URL_SAFE_NO_PAD.encode(bytes)
            }
        }
    }

    pub fn decode(raw: &str) -> ApiResult<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid_cursor())?;
        match bytes.len() {
            16 => JobId::from_slice(&bytes).map(Self::Ready),
            24 => {
                let (time, id) = bytes.split_at(8);
                let failed_at = i64::from_be_bytes(time.try_into().map_err(|_| invalid_cursor())?);
                JobId::from_slice(id).map(|id| Self::Error(Position { failed_at, id }))
            }
            _ => None,
        }
        .ok_or_else(invalid_cursor)
    }

    /// The failure-order position, or a 400 if this cursor came from another listing.
    pub fn into_position(self) -> ApiResult<Position> {
        match self {
            Self::Error(position) => Ok(position),
            Self::Ready(_) => Err(invalid_cursor()),
        }
    }
}

pub fn invalid_cursor() -> ApiError {
    ApiError::BadRequest("invalid cursor: pass back the `next` value of a previous page".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let id = JobId::new();
        for cursor in [
            Cursor::Ready(id),
            Cursor::Error(Position {
                failed_at: 1_700_000_000_000,
                id,
            }),
        ] {
            assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        }
        for garbage in ["", "!!!", "AAAA", "not-a-cursor-at-all"] {
            assert!(Cursor::decode(garbage).is_err(), "{garbage}");
        }
    }
}
