//! W3C Trace Context (`traceparent`, `tracestate`): the producer's trace a job belongs to,
//! read from an enqueue's headers, stored with the job and sent on with its deliveries.
//!
//! Parsed by the rules of <https://www.w3.org/TR/trace-context/>: a header that breaks them
//! is ignored (the job starts a trace of its own), never an error, as the specification
//! asks of a receiver.

use std::fmt;

/// The request and delivery header names.
pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` kept (the specification's 32 list members of at most 256
/// characters allow more, but it lets a receiver cut at 512); longer ones are dropped.
pub const MAX_TRACESTATE: usize = 512;

/// One position in a trace: the trace, the span that is the parent of what comes next,
/// the sampling flags, and the vendors' `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
    pub flags: u8,
    pub state: Option<String>,
}

impl TraceContext {
    /// From the two headers; `None` when `traceparent` is absent or invalid. A `tracestate`
    /// that is too long or not visible ASCII is dropped, the context kept.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let value = traceparent.trim();
        let version = value.get(0..2)?;
        let version = u8::from_str_radix(version, 16).ok()?;
        // Version ff is invalid; a later version than 00 may carry more fields after ours.
        if version == 0xff || !is_lower_hex(&value[0..2]) {
            return None;
        }
        let ours = value.get(0..55)?;
        if (version == 0 && value.len() != 55) || (value.len() > 55 && value.as_bytes()[55] != b'-')
        {
            return None;
        }
        let fields: Vec<&str> = ours.split('-').collect();
        let [_, trace, parent, flags] = fields.as_slice() else {
            return None;
        };
        let trace_id: [u8; 16] = decode(trace)?;
        let parent_id: [u8; 8] = decode(parent)?;
        let [flags] = decode::<1>(flags)?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        let state = tracestate
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE)
            .filter(|s| s.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .map(str::to_owned);
        Some(Self {
            trace_id,
            parent_id,
            flags,
            state,
        })
    }

    /// The `traceparent` header's value (version 00).
    pub fn traceparent(&self) -> String {
        self.to_string()
    }

    /// The same trace and state under another parent span.
    pub fn with_parent(&self, parent_id: [u8; 8]) -> Self {
        Self {
            parent_id,
            ..self.clone()
        }
    }

    /// From the two columns a job stores it in (see [`Self::columns`]).
    pub fn from_columns(traceparent: Option<String>, tracestate: Option<String>) -> Option<Self> {
        Self::parse(&traceparent?, tracestate.as_deref())
    }

    /// The two columns a job stores it in: `traceparent`, `tracestate`.
    pub fn columns(trace: Option<&Self>) -> (Option<String>, Option<&str>) {
        match trace {
            Some(trace) => (Some(trace.traceparent()), trace.state.as_deref()),
            None => (None, None),
        }
    }

    /// The trace id as 32 lowercase hex digits (what tracing back ends show).
    pub fn trace_id_hex(&self) -> String {
        hex::encode(self.trace_id)
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            hex::encode(self.trace_id),
            hex::encode(self.parent_id),
            self.flags
        )
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn decode<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !is_lower_hex(s) {
        return None;
    }
    let mut out = [0; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_reads_back_as_written() {
        let tc = TraceContext::parse(VALID, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(tc.traceparent(), VALID);
        assert_eq!(tc.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tc.flags, 1);
        assert_eq!(tc.state.as_deref(), Some("congo=t61rcWkgMzE"));
        let child = tc.with_parent([7; 8]);
        assert_eq!(
            child.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0707070707070707-01"
        );
    }

    #[test]
    fn invalid_traceparents_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_as_far_as_version_00_goes() {
        let later = format!("01{}-what-comes-next", &VALID[2..]);
        let tc = TraceContext::parse(&later, None).unwrap();
        assert_eq!(tc.traceparent(), VALID);
    }

    #[test]
    fn an_unusable_tracestate_is_dropped_and_the_context_kept() {
        let long = "a=".to_owned() + &"b".repeat(MAX_TRACESTATE);
        for state in [long.as_str(), "a=\u{e9}", "   "] {
            let tc = TraceContext::parse(VALID, Some(state)).unwrap();
            assert_eq!(tc.state, None, "{state:?}");
        }
    }
}
