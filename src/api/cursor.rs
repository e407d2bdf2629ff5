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
    /// Before this delivery time and id (the delivery log, newest first).
    Delivered(Position),
    /// Before this entry (the audit log, newest first).
    Audit(i64),
    /// From this id down (a search across queues, newest first).
    Search(JobId),
    /// After this lease expiry and job id (the held leases, soonest expiry first).
    Leases(Position),
}

/// The first byte of a delivery-log cursor, so it cannot be taken for another listing's.
const DELIVERED_TAG: u8 = b'D';
/// The first byte of an audit-log cursor.
const AUDIT_TAG: u8 = b'A';
/// The first byte of a search's cursor.
const SEARCH_TAG: u8 = b'S';
/// The first byte of a held leases' cursor.
const LEASES_TAG: u8 = b'L';

fn time_and_id(position: Position) -> Vec<u8> {
    let mut bytes = position.at.to_be_bytes().to_vec();
    bytes.extend_from_slice(position.id.as_bytes());
    bytes
}

fn position_of(bytes: &[u8]) -> Option<Position> {
    let (time, id) = bytes.split_at_checked(8)?;
    Some(Position {
        at: i64::from_be_bytes(time.try_into().ok()?),
        id: JobId::from_slice(id)?,
    })
}

impl Cursor {
    pub fn encode(self) -> String {
        match self {
            Self::Ready(id) => URL_SAFE_NO_PAD.encode(id.as_bytes()),
            Self::Error(position) => URL_SAFE_NO_PAD.encode(time_and_id(position)),
            Self::Delivered(position) => {
                let mut bytes = vec![DELIVERED_TAG];
                bytes.extend(time_and_id(position));
                URL_SAFE_NO_PAD.encode(bytes)
            }
            Self::Audit(id) => {
                let mut bytes = vec![AUDIT_TAG];
                bytes.extend(id.to_be_bytes());
                URL_SAFE_NO_PAD.encode(bytes)
            }
            Self::Search(id) => {
                let mut bytes = vec![SEARCH_TAG];
                bytes.extend(id.as_bytes());
                URL_SAFE_NO_PAD.encode(bytes)
            }
            Self::Leases(position) => {
                let mut bytes = vec![LEASES_TAG];
                bytes.extend(time_and_id(position));
                URL_SAFE_NO_PAD.encode(bytes)
            }
        }
    }

    pub fn decode(raw: &str) -> ApiResult<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid_cursor())?;
        match bytes.len() {
            16 => JobId::from_slice(&bytes).map(Self::Ready),
            24 => position_of(&bytes).map(Self::Error),
            25 if bytes[0] == DELIVERED_TAG => position_of(&bytes[1..]).map(Self::Delivered),
            25 if bytes[0] == LEASES_TAG => position_of(&bytes[1..]).map(Self::Leases),
            9 if bytes[0] == AUDIT_TAG => bytes[1..]
                .try_into()
                .ok()
                .map(|id| Self::Audit(i64::from_be_bytes(id))),
            17 if bytes[0] == SEARCH_TAG => JobId::from_slice(&bytes[1..]).map(Self::Search),
            _ => None,
        }
        .ok_or_else(invalid_cursor)
    }

    /// The failure-order position, or a 400 if this cursor came from another listing.
    pub fn into_position(self) -> ApiResult<Position> {
        match self {
            Self::Error(position) => Ok(position),
            Self::Ready(_)
            | Self::Delivered(_)
            | Self::Audit(_)
            | Self::Search(_)
            | Self::Leases(_) => Err(invalid_cursor()),
        }
    }

    /// The id of a READY listing, or a 400 if this cursor came from another listing.
    pub fn into_ready(self) -> ApiResult<JobId> {
        match self {
            Self::Ready(id) => Ok(id),
            Self::Error(_)
            | Self::Delivered(_)
            | Self::Audit(_)
            | Self::Search(_)
            | Self::Leases(_) => Err(invalid_cursor()),
        }
    }

    /// The delivery-order position, or a 400 if this cursor came from another listing.
    pub fn into_delivered(self) -> ApiResult<Position> {
        match self {
            Self::Delivered(position) => Ok(position),
            Self::Ready(_)
            | Self::Error(_)
            | Self::Audit(_)
            | Self::Search(_)
            | Self::Leases(_) => Err(invalid_cursor()),
        }
    }

    /// The audit entry a page ends at, or a 400 if this cursor came from another listing.
    pub fn into_audit(self) -> ApiResult<i64> {
        match self {
            Self::Audit(id) => Ok(id),
            Self::Ready(_)
            | Self::Error(_)
            | Self::Delivered(_)
            | Self::Search(_)
            | Self::Leases(_) => Err(invalid_cursor()),
        }
    }

    /// Where a search's page starts, or a 400 if this cursor came from another listing.
    pub fn into_search(self) -> ApiResult<JobId> {
        match self {
            Self::Search(id) => Ok(id),
            Self::Ready(_)
            | Self::Error(_)
            | Self::Delivered(_)
            | Self::Audit(_)
            | Self::Leases(_) => Err(invalid_cursor()),
        }
    }
}

impl Cursor {
    /// Where a page of held leases starts, or a 400 if this cursor came from another
    /// listing.
    pub fn into_leases(self) -> ApiResult<Position> {
        match self {
            Self::Leases(position) => Ok(position),
            _ => Err(invalid_cursor()),
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
                at: 1_700_000_000_000,
                id,
            }),
            Cursor::Delivered(Position {
                at: 1_700_000_000_000,
                id,
            }),
            Cursor::Audit(42),
            Cursor::Search(id),
        ] {
            assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        }
        for garbage in ["", "!!!", "AAAA", "not-a-cursor-at-all"] {
            assert!(Cursor::decode(garbage).is_err(), "{garbage}");
        }
    }
}
