//! One clock across hosts, as NTP estimates it (RFC 5905 §8, sans-IO): the controller sends at
//! `t1` (its clock), the agent receives at `t2` and replies at `t3` (the agent's clock), the
//! controller receives at `t4`. The agent's clock minus the controller's is
//! θ = ((t2 − t1) + (t3 − t4)) / 2, the round-trip delay δ = (t4 − t1) − (t3 − t2), and the true
//! offset lies within θ ± δ/2; of several exchanges the one with the smallest δ is kept (its
//! bound is the tightest). The controller repeats the estimate during a run (clocks drift) and
//! every agent reads its receipts through the run's clock ([`crate::profile::slice::RunClock`],
//! offset −θ).

use serde::{Deserialize, Serialize};

/// One exchange's four timestamps (µs since the Unix epoch: t1 and t4 on the controller's
/// clock, t2 and t3 on the agent's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    /// Controller sends.
    pub t1: u64,
    /// Agent receives.
    pub t2: u64,
    /// Agent replies.
    pub t3: u64,
    /// Controller receives.
    pub t4: u64,
}

impl Exchange {
    /// θ: the agent's clock minus the controller's (µs).
    pub fn offset_us(&self) -> i64 {
        ((self.t2 as i64 - self.t1 as i64) + (self.t3 as i64 - self.t4 as i64)) / 2
    }

    /// δ: the round trip, the agent's own time left out (µs; never below 0).
    pub fn delay_us(&self) -> u64 {
        let rtt = self.t4 as i64 - self.t1 as i64;
        let held = self.t3 as i64 - self.t2 as i64;
        (rtt - held).max(0) as u64
    }
}

/// An estimate of an agent's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimate {
    /// The agent's clock minus the controller's (µs).
    pub offset_us: i64,
    /// Half the round trip of the exchange it comes from: the true offset is within
    /// `offset_us ± uncertainty_us` (µs).
    pub uncertainty_us: u64,
    /// Exchanges it was chosen from.
    pub samples: u32,
}

/// The estimate from several exchanges: the one with the smallest delay (RFC 5905 §8's clock
/// filter keeps the minimum-delay sample). `None` without any.
pub fn estimate(exchanges: &[Exchange]) -> Option<Estimate> {
    let best = exchanges.iter().min_by_key(|e| e.delay_us())?;
    Some(Estimate {
        offset_us: best.offset_us(),
        uncertainty_us: best.delay_us().div_ceil(2),
        samples: exchanges.len() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_250_ms_ahead_is_found_within_half_the_round_trip() {
        // The agent's clock is 250 ms ahead; one-way delays vary, the agent holds each 30 µs.
        let ahead = 250_000i64;
        let mut ex = Vec::new();
        for (k, (up, down)) in [(400u64, 900u64), (120, 130), (2000, 150), (700, 700)]
            .iter()
            .enumerate()
        {
            let t1 = 1_000_000 + k as u64 * 100_000;
            let t2 = (t1 + up) as i64 + ahead;
            let t3 = t2 + 30;
            let t4 = (t3 - ahead) as u64 + down;
            ex.push(Exchange {
                t1,
                t2: t2 as u64,
                t3: t3 as u64,
                t4,
            });
        }
        let e = estimate(&ex).unwrap();
        // The symmetric 120/130 µs exchange wins: off by 5 µs, bounded by 125.
        assert_eq!(e.uncertainty_us, 125);
        assert!((e.offset_us - ahead).abs() <= 5, "{e:?}");
        assert!((e.offset_us - ahead).unsigned_abs() <= e.uncertainty_us);
        assert_eq!(e.samples, 4);
        assert_eq!(estimate(&[]), None);
    }
}
