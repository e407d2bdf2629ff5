//! Cron expressions in a time zone: parsed once at the edge ([`CronSpec::parse`]), then asked
//! for the tick after a time and the latest tick up to a time. The calendar work (fields,
//! aliases, daylight-saving gaps and overlaps) is the `croner` crate's; the zones are the
//! IANA database compiled in by `chrono-tz`.
//!
//! Daylight saving follows croner's documented rules (OCPS / Vixie cron): a fixed-time
//! expression (`0 30 2 * * *`) whose time falls into a spring-forward gap fires once, at the
//! first instant after the gap; over a fall-back overlap it fires once, at the first pass.
//! An interval expression (`*/15 * * * *`) skips the times inside a gap and fires at each
//! matching time of both passes of an overlap.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{LazyLock, Mutex};

use chrono::{DateTime, TimeZone};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::model::{InvalidInput, UnixMillis};

/// The time zone a schedule uses when it names none.
pub const DEFAULT_TIMEZONE: &str = "UTC";

/// The nicknames accepted beside the 5- and 6-field forms.
const NICKNAMES: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// How many parsed expressions [`CronSpec::parse_stored`] keeps (a few MB at most).
const PARSED_KEPT: usize = 4096;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A valid cron expression and the time zone its fields are read in.
#[derive(Clone)]
pub struct CronSpec {
    expression: String,
    timezone: Tz,
    cron: Cron,
    /// Some day of some year matches (see [`matches_some_day`]); an expression that never
    /// fires answers at once instead of searching thousands of years.
    fires: bool,
}

/// Whether `cron` matches any day at all. Years are not part of an expression (they are
/// disallowed), and 2001–2028 holds every kind of year there is (leap or not, starting on
/// each weekday: the calendar repeats every 28 years from 1901 to 2099), so a day pattern
/// that matches no day of those 28 years matches none ever: `0 0 30 2 *`, `0 0 31 4,6 *`.
/// At most 28 × 12 × 31 day checks (well under a millisecond), where croner's own search
/// walks every year up to 5000 before it gives up (~17 ms).
fn matches_some_day(cron: &Cron) -> bool {
    use chrono::{Datelike, NaiveDate};
    let pattern = &cron.pattern;
    for year in 2001..=2028 {
        for month in 1..=12u32 {
            if !pattern.month_match(month).unwrap_or(false) {
                continue;
            }
            for day in 1..=31u32 {
                let Some(date) = NaiveDate::from_ymd_opt(year, month, day) else {
                    break;
                };
                let weekday =
                    croner::Weekday::from_days_from_sunday(date.weekday().num_days_from_sunday());
                if pattern
                    .day_match(year, month, day, weekday)
                    .unwrap_or(false)
                {
                    return true;
                }
            }
        }
    }
    false
}

impl fmt::Debug for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CronSpec({:?} in {})",
            self.expression,
            self.timezone.name()
        )
    }
}

impl PartialEq for CronSpec {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression && self.timezone == other.timezone
    }
}

/// One field of the 5- or 6-field form: its name, its range, the names it also takes.
struct Field {
    name: &'static str,
    low: u32,
    high: u32,
    names: &'static [&'static str],
}

const SECOND: Field = Field {
    name: "second",
    low: 0,
    high: 59,
    names: &[],
};
const MINUTE: Field = Field {
    name: "minute",
    low: 0,
    high: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    low: 0,
    high: 23,
    names: &[],
};
const DAY: Field = Field {
    name: "day of the month",
    low: 1,
    high: 31,
    names: &["L", "W", "?"],
};
const MONTH: Field = Field {
    name: "month",
    low: 1,
    high: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
};
const WEEKDAY: Field = Field {
    name: "day of the week",
    low: 0,
    high: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "L", "?"],
};

/// What is wrong with the first field of `expression` (5 or 6 fields) that holds a number
/// out of its range or a word it does not take, said so a person can mend it: which field,
/// what it holds, what it takes. `None` when no field is wrong that way.
fn field_problem(expression: &str) -> Option<String> {
    let parts: Vec<&str> = expression.split_whitespace().collect();
    let fields: &[Field] = if parts.len() == 6 {
        &[SECOND, MINUTE, HOUR, DAY, MONTH, WEEKDAY]
    } else {
        &[MINUTE, HOUR, DAY, MONTH, WEEKDAY]
    };
    let ordinal = ["1st", "2nd", "3rd", "4th", "5th", "6th"];
    for ((field, part), nth) in fields.iter().zip(&parts).zip(ordinal) {
        let takes = if field.names.is_empty() {
            format!("{} to {}", field.low, field.high)
        } else {
            format!(
                "{} to {} or {}",
                field.low,
                field.high,
                field.names.join(", ")
            )
        };
        let wrong = |what: String| {
            Some(format!(
                "is invalid: its {nth} field, the {}, is `{part}`: {what}; it takes {takes}, \
                 `*`, ranges (`a-b`), lists (`a,b`) and steps (`*/n`)",
                field.name
            ))
        };
        for item in part.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((range, step)) => (range, Some(step)),
                None => (item, None),
            };
            if let Some(step) = step
                && !step
                    .parse::<u32>()
                    .is_ok_and(|n| n >= 1 && n <= field.high.max(1))
            {
                return wrong(format!(
                    "the step `/{step}` is not a number from 1 to {}",
                    field.high
                ));
            }
            for token in range.split('-').filter(|t| !t.is_empty() && *t != "*") {
                // `5#2` (the second Friday) and `15W`: the number before the mark counts.
                let number = token.trim_end_matches(['L', 'W', 'l', 'w']);
                let number = number.split('#').next().unwrap_or(number);
                match number.parse::<u32>() {
                    Ok(n) if (field.low..=field.high).contains(&n) => {}
                    Ok(n) => return wrong(format!("{n} is out of range")),
                    Err(_)
                        if field
                            .names
                            .iter()
                            .any(|name| name.eq_ignore_ascii_case(token)) => {}
                    Err(_) => return wrong(format!("`{token}` is not a number it takes")),
                }
            }
        }
    }
    None
}

impl CronSpec {
    /// `expression`: 5 fields (minute hour day-of-month month day-of-week), 6 with a leading
    /// seconds field, or a nickname (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`);
    /// `timezone`: an IANA name (`Europe/Paris`, `UTC`).
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, InvalidInput> {
        let expression = expression.trim();
        let timezone = Tz::from_str(timezone.trim()).map_err(|_| {
            InvalidInput(format!(
                "timezone: `{timezone}` is not an IANA time zone name (such as UTC or Europe/Paris)"
            ))
        })?;
        let fields = expression.split_whitespace().count();
        let nickname = expression.starts_with('@');
        if nickname && !NICKNAMES.contains(&expression.to_ascii_lowercase().as_str()) {
            return Err(InvalidInput(format!(
                "cron: `{expression}` is not one of {}",
                NICKNAMES.join(", ")
            )));
        }
        if !nickname && !(5..=6).contains(&fields) {
            return Err(InvalidInput(format!(
                "cron: `{expression}` has {fields} fields; give 5 (minute hour day month \
                 weekday) or 6 (a leading seconds field)"
            )));
        }
        let nickname = expression.to_ascii_lowercase();
        // croner knows `@midnight` as no nickname; it is `@daily` by another name.
        let pattern = if nickname == "@midnight" {
            "@daily"
        } else {
            expression
        };
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(pattern)
            .map_err(|e| {
                let said = (!nickname.starts_with('@'))
                    .then(|| field_problem(expression))
                    .flatten()
                    .unwrap_or_else(|| format!("is invalid ({e})"));
                InvalidInput(format!("cron: `{expression}` {said}"))
            })?;
        Ok(Self {
            expression: expression.to_owned(),
            timezone,
            fires: matches_some_day(&cron),
            cron,
        })
    }

    /// [`parse`](Self::parse) for the scheduler, which reads every due schedule's stored
    /// expression at each round: parsing costs about 25 µs (a tick's search about 1 µs), so
    /// parsed expressions are kept, up to [`PARSED_KEPT`] of them.
    pub fn parse_stored(expression: &str, timezone: &str) -> Result<Self, InvalidInput> {
        static PARSED: LazyLock<Mutex<HashMap<(String, String), CronSpec>>> =
            LazyLock::new(Mutex::default);
        let key = (expression.to_owned(), timezone.to_owned());
        if let Some(spec) = lock(&PARSED).get(&key) {
            return Ok(spec.clone());
        }
        let spec = Self::parse(expression, timezone)?;
        let mut parsed = lock(&PARSED);
        if parsed.len() >= PARSED_KEPT {
            parsed.clear();
        }
        parsed.insert(key, spec.clone());
        Ok(spec)
    }

    /// The expression as given (trimmed).
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The IANA name of the time zone.
    pub fn timezone(&self) -> &str {
        self.timezone.name()
    }

    /// The first tick strictly after `at`, if the expression ever fires again.
    pub fn next_after(&self, at: UnixMillis) -> Option<UnixMillis> {
        if !self.fires {
            return None;
        }
        let start = self.zoned(at)?;
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        (next.timestamp_millis() > at).then(|| next.timestamp_millis())
    }

    /// The latest tick at or before `at`, if there is one.
    pub fn latest_at_or_before(&self, at: UnixMillis) -> Option<UnixMillis> {
        if !self.fires {
            return None;
        }
        // Ticks fall on whole seconds: searching from the second `at` falls in makes the
        // search inclusive of a tick at exactly that second.
        let start = self.zoned(at.div_euclid(1000) * 1000)?;
        let previous = self.cron.find_previous_occurrence(&start, true).ok()?;
        (previous.timestamp_millis() <= at).then(|| previous.timestamp_millis())
    }

    fn zoned(&self, at: UnixMillis) -> Option<DateTime<Tz>> {
        self.timezone.timestamp_millis_opt(at).single()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix milliseconds of an RFC 3339 time.
    fn at(rfc3339: &str) -> UnixMillis {
        DateTime::parse_from_rfc3339(rfc3339)
            .expect("a valid RFC 3339 time")
            .timestamp_millis()
    }

    fn spec(expression: &str, timezone: &str) -> CronSpec {
        CronSpec::parse(expression, timezone).expect("a valid expression")
    }

    /// The first `n` ticks after `from`, as RFC 3339 in UTC.
    fn ticks(spec: &CronSpec, from: &str, n: usize) -> Vec<String> {
        let mut at = super::tests::at(from);
        let mut out = Vec::new();
        for _ in 0..n {
            at = spec.next_after(at).expect("a next tick");
            out.push(
                chrono::Utc
                    .timestamp_millis_opt(at)
                    .single()
                    .expect("a valid instant")
                    .to_rfc3339(),
            );
        }
        out
    }

    #[test]
    fn five_fields_tick_on_the_minute_and_six_fields_on_the_second() {
        let hourly = spec("15 * * * *", "UTC");
        assert_eq!(
            ticks(&hourly, "2026-11-23T09:20:00Z", 2),
            ["2026-11-23T10:15:00+00:00", "2026-11-23T11:15:00+00:00"]
        );
        let every_second = spec("* * * * * *", "UTC");
        assert_eq!(
            ticks(&every_second, "2026-11-23T09:20:00.400Z", 2),
            ["2026-11-23T09:20:01+00:00", "2026-11-23T09:20:02+00:00"]
        );
    }

    #[test]
    fn next_after_is_strictly_after_even_on_a_tick() {
        let minutely = spec("* * * * *", "UTC");
        let tick = at("2026-11-23T09:20:00Z");
        assert_eq!(minutely.next_after(tick), Some(tick + 60_000));
        assert_eq!(minutely.next_after(tick - 1), Some(tick));
    }

    #[test]
    fn latest_at_or_before_includes_a_tick_at_that_time() {
        let minutely = spec("* * * * *", "UTC");
        let tick = at("2026-11-23T09:20:00Z");
        assert_eq!(minutely.latest_at_or_before(tick), Some(tick));
        assert_eq!(minutely.latest_at_or_before(tick + 59_999), Some(tick));
        assert_eq!(minutely.latest_at_or_before(tick - 1), Some(tick - 60_000));
    }

    #[test]
    fn nicknames_are_accepted() {
        let from = "2026-11-23T09:20:00Z";
        assert_eq!(
            ticks(&spec("@hourly", "UTC"), from, 1),
            ["2026-11-23T10:00:00+00:00"]
        );
        assert_eq!(
            ticks(&spec("@daily", "UTC"), from, 1),
            ["2026-11-24T00:00:00+00:00"]
        );
        assert_eq!(
            ticks(&spec("@midnight", "UTC"), from, 1),
            ["2026-11-24T00:00:00+00:00"]
        );
        // 2026-11-23 is a Monday: weekly is Sunday midnight.
        assert_eq!(
            ticks(&spec("@weekly", "UTC"), from, 1),
            ["2026-11-29T00:00:00+00:00"]
        );
        assert_eq!(
            ticks(&spec("@monthly", "UTC"), from, 1),
            ["2026-12-01T00:00:00+00:00"]
        );
        assert_eq!(
            ticks(&spec("@YEARLY", "UTC"), from, 1),
            ["2027-01-01T00:00:00+00:00"]
        );
    }

    #[test]
    fn invalid_expressions_and_zones_are_refused_with_a_reason() {
        for (expression, timezone, says) in [
            ("", "UTC", "0 fields"),
            ("* * * *", "UTC", "4 fields"),
            ("0 0 0 * * * 2027", "UTC", "7 fields"),
            (
                "61 * * * *",
                "UTC",
                "its 1st field, the minute, is `61`: 61 is out of range",
            ),
            (
                "0 25 * * *",
                "UTC",
                "the hour, is `25`: 25 is out of range; it takes 0 to 23",
            ),
            ("0 9 * 13 *", "UTC", "the month, is `13`"),
            ("0 9 * * FUNDAY", "UTC", "the day of the week, is `FUNDAY`"),
            (
                "*/0 * * * *",
                "UTC",
                "the step `/0` is not a number from 1 to 59",
            ),
            (
                "0 0 9 1-40 * *",
                "UTC",
                "its 4th field, the day of the month, is `1-40`",
            ),
            ("* * * * * * ", "Mars/Olympus", "IANA"),
            ("@reboot", "UTC", "is not one of"),
            ("@every 5m", "UTC", "is not one of"),
            ("a b c d e", "UTC", "invalid"),
        ] {
            let err = CronSpec::parse(expression, timezone).expect_err(expression);
            assert!(err.0.contains(says), "{expression:?}: {}", err.0);
        }
    }

    #[test]
    fn fields_are_read_in_the_time_zone() {
        // 09:00 in Paris is 08:00 UTC in winter, 07:00 UTC in summer.
        let nine = spec("0 9 * * *", "Europe/Paris");
        assert_eq!(nine.timezone(), "Europe/Paris");
        assert_eq!(
            ticks(&nine, "2026-11-23T09:20:00Z", 1),
            ["2026-11-24T08:00:00+00:00"]
        );
        assert_eq!(
            ticks(&nine, "2026-06-01T12:00:00Z", 1),
            ["2026-06-02T07:00:00+00:00"]
        );
    }

    // New York springs forward on 2026-03-08 at 02:00 EST (07:00 UTC) to 03:00 EDT, and falls
    // back on 2026-11-01 at 02:00 EDT (06:00 UTC) to 01:00 EST.

    #[test]
    fn a_fixed_time_in_a_spring_forward_gap_fires_once_right_after_the_gap() {
        let two_thirty = spec("30 2 * * *", "America/New_York");
        assert_eq!(
            ticks(&two_thirty, "2026-03-07T06:00:00Z", 3),
            [
                // 02:30 EST on the 7th.
                "2026-03-07T07:30:00+00:00",
                // 02:30 does not exist on the 8th: 03:00 EDT, the first instant after the gap.
                "2026-03-08T07:00:00+00:00",
                // 02:30 EDT on the 9th.
                "2026-03-09T06:30:00+00:00",
            ]
        );
    }

    #[test]
    fn an_interval_skips_the_times_inside_a_spring_forward_gap() {
        let half_hourly = spec("*/30 * * * *", "America/New_York");
        assert_eq!(
            ticks(&half_hourly, "2026-03-08T06:15:00Z", 3),
            [
                // 01:30 EST
                "2026-03-08T06:30:00+00:00",
                // 02:00 and 02:30 do not exist: 03:00 EDT.
                "2026-03-08T07:00:00+00:00",
                // 03:30 EDT
                "2026-03-08T07:30:00+00:00",
            ]
        );
    }

    #[test]
    fn a_fixed_time_in_a_fall_back_overlap_fires_once_at_the_first_pass() {
        let one_thirty = spec("30 1 * * *", "America/New_York");
        assert_eq!(
            ticks(&one_thirty, "2026-10-31T12:00:00Z", 2),
            [
                // 01:30 EDT on 1 November: the first pass; the second (01:30 EST) is skipped.
                "2026-11-01T05:30:00+00:00",
                "2026-11-02T06:30:00+00:00",
            ]
        );
    }

    #[test]
    fn an_interval_fires_on_both_passes_of_a_fall_back_overlap() {
        let half_hourly = spec("*/30 1 * * *", "America/New_York");
        assert_eq!(
            ticks(&half_hourly, "2026-11-01T04:45:00Z", 4),
            [
                // 01:00 and 01:30 EDT
                "2026-11-01T05:00:00+00:00",
                "2026-11-01T05:30:00+00:00",
                // 01:00 and 01:30 EST
                "2026-11-01T06:00:00+00:00",
                "2026-11-01T06:30:00+00:00",
            ]
        );
    }

    #[test]
    fn a_stored_expression_parses_the_same_from_the_cache() {
        let first = CronSpec::parse_stored("*/5 * * * *", "Europe/Paris").unwrap();
        let again = CronSpec::parse_stored("*/5 * * * *", "Europe/Paris").unwrap();
        assert_eq!(first, again);
        assert_eq!(again, spec("*/5 * * * *", "Europe/Paris"));
        let from = at("2026-11-23T09:21:00Z");
        assert_eq!(again.next_after(from), Some(from + 4 * 60_000));
        assert!(CronSpec::parse_stored("nope", "UTC").is_err());
    }

    #[test]
    fn an_expression_that_never_fires_has_no_next_tick() {
        let never = spec("0 0 30 2 *", "UTC");
        assert_eq!(never.next_after(at("2026-11-23T09:20:00Z")), None);
        assert_eq!(never.latest_at_or_before(at("2026-11-23T09:20:00Z")), None);
        for never in ["0 0 31 4,6,9,11 *", "0 0 30,31 2 *", "*/5 * 31 2 *"] {
            assert!(!spec(never, "Europe/Paris").fires, "{never}");
        }
        // Rare is not never: a leap day, the fifth Friday, the last day, Feb 30 or a Monday.
        for rare in [
            "0 0 29 2 *",
            "0 0 * * 5#5",
            "0 0 L 2 *",
            "0 0 30 2 MON",
            "0 0 31 * *",
        ] {
            let spec = spec(rare, "UTC");
            assert!(spec.fires, "{rare}");
            assert!(
                spec.next_after(at("2026-11-23T09:20:00Z")).is_some(),
                "{rare}"
            );
        }
    }
}
