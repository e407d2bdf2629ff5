//! The status a live job is stored with: one enum whose numbers both dialects' SQL take
//! from it (`jobs.status`), and the `sql_once!` macro that writes them into SQL text once.

use super::records::JobState;

/// Where a live job stands, as `jobs.status` stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i16)]
pub enum JobStatus {
    /// Due: claimable now.
    Ready = 0,
    /// Leased to a delivery (an attempt is running).
    InFlight = 1,
    /// No longer written: dead jobs move to `dead_letters`. Read for old rows only.
    Dead = 2,
    /// Not due yet: a delay, or a retry's backoff. Promoted to ready by the claim that finds
    /// it due.
    Scheduled = 3,
    /// Behind an earlier live job of its ordering key (its *head*); promoted when that one
    /// leaves.
    Blocked = 4,
}

impl JobStatus {
    /// The number stored in `jobs.status`.
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// The status a stored number stands for.
    pub fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            0 => Self::Ready,
            1 => Self::InFlight,
            2 => Self::Dead,
            3 => Self::Scheduled,
            4 => Self::Blocked,
            _ => return None,
        })
    }

    /// How the API shows a job of this status: scheduled and blocked jobs are READY to a
    /// client (waiting for their turn), only a running attempt is in flight.
    pub fn state(self) -> JobState {
        match self {
            Self::Ready | Self::Scheduled | Self::Blocked => JobState::Ready,
            Self::InFlight => JobState::InFlight,
            Self::Dead => JobState::Dead,
        }
    }
}

/// `jobs.status` values for SQL text, by name (`{READY}`, `{IN_FLIGHT}`, …), for
/// [`sql_once!`](crate::sql_once).
pub mod codes {
    use super::JobStatus;

    pub const READY: i16 = JobStatus::Ready.code();
    pub const IN_FLIGHT: i16 = JobStatus::InFlight.code();
    pub const SCHEDULED: i16 = JobStatus::Scheduled.code();
    pub const BLOCKED: i16 = JobStatus::Blocked.code();
}

/// A statement's SQL, formatted once (on first use) at its call site: the statuses are
/// named constants, so the text is built by `format!`, and building it on every call would
/// cost the hot path an allocation and a formatting pass before the statement cache is even
/// asked.
#[macro_export]
macro_rules! sql_once {
    ($($format:tt)*) => {{
        static SQL: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| format!($($format)*));
        SQL.as_str()
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_from_its_code() {
        for status in [
            JobStatus::Ready,
            JobStatus::InFlight,
            JobStatus::Dead,
            JobStatus::Scheduled,
            JobStatus::Blocked,
        ] {
            assert_eq!(JobStatus::from_code(i64::from(status.code())), Some(status));
        }
        assert_eq!(JobStatus::from_code(9), None);
    }
}
