//! A closed session's share of each clock minute, the unit of the ledger's rollup table
//! (`audience_minutes`): listening seconds per minute sum across sessions, servers and groups,
//! so listening hours per hour or day are exact (a session over midnight counts in both days)
//! and the listeners at a minute (its listening seconds ÷ 60, the minute's average) sum across
//! mounts and servers. Pure arithmetic on Unix milliseconds.

/// Milliseconds in a minute.
pub const MINUTE_MS: i64 = 60_000;

/// The start (Unix seconds) of the minute holding `at_ms`.
pub fn minute_of(at_ms: i64) -> i64 {
    at_ms.div_euclid(MINUTE_MS) * 60
}

/// The seconds a session from `started_ms` to `ended_ms` spent in each minute it touched, as
/// `(minute start in Unix seconds, seconds)`, in time order; empty when it ended before it
/// started. The seconds sum to the session's length.
pub fn split_by_minute(started_ms: i64, ended_ms: i64) -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    if ended_ms <= started_ms {
        return out;
    }
    let mut at = started_ms;
    while at < ended_ms {
        let minute_start = at.div_euclid(MINUTE_MS) * MINUTE_MS;
        let minute_end = minute_start + MINUTE_MS;
        let until = minute_end.min(ended_ms);
        out.push((minute_start / 1000, (until - at) as f64 / 1000.0));
        at = until;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_inside_one_minute() {
        assert_eq!(split_by_minute(61_000, 91_500), vec![(60, 30.5)]);
        assert_eq!(minute_of(61_000), 60);
    }

    #[test]
    fn a_session_across_minutes_sums_to_its_length() {
        let parts = split_by_minute(59_000, 185_000);
        assert_eq!(parts, vec![(0, 1.0), (60, 60.0), (120, 60.0), (180, 5.0)]);
        let total: f64 = parts.iter().map(|p| p.1).sum();
        assert_eq!(total, 126.0);
    }

    #[test]
    fn empty_and_reversed_sessions_have_no_minutes() {
        assert!(split_by_minute(5_000, 5_000).is_empty());
        assert!(split_by_minute(5_000, 1_000).is_empty());
    }
}
