//! Stages, as k6 has them (`stages: [{ duration: "60s", target: 20000 }, …]`): each stage ramps
//! the number of listeners linearly from the previous stage's target (0 before the first) to
//! its own over its duration. A [`Schedule`] is a run's (or a group's) list of stages and
//! answers, for any instant, how many listeners are wanted; a second is a *hold* second when
//! the target stays the same over all of it (the hold averages of a report are taken over
//! those).

use crate::profile::secs::Secs;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// One stage: ramp to `target` listeners over `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Listeners wanted at the end of the stage (listeners).
    pub target: u32,
    /// How long the stage lasts.
    pub duration: Secs,
}

/// A `--stage` value that is not `DURATION:TARGET`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("bad stage {0:?} (expected DURATION:TARGET, e.g. 30s:2000)")]
pub struct BadStage(pub String);

impl FromStr for Stage {
    type Err = BadStage;
    /// k6's `--stage` form: `30s:2000`.
    fn from_str(s: &str) -> Result<Stage, BadStage> {
        let (d, t) = s.split_once(':').ok_or_else(|| BadStage(s.into()))?;
        Ok(Stage {
            duration: d.parse().map_err(|_| BadStage(s.into()))?,
            target: t.trim().parse().map_err(|_| BadStage(s.into()))?,
        })
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.duration, self.target)
    }
}

/// A list of stages (see the module comment).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The stages, in order.
    pub stages: Vec<Stage>,
}

impl Schedule {
    /// The k6 `ramping-vus` shape of the older flags: ramp to `n` at `rate` listeners per
    /// second, hold `hold` seconds (the run then ends with everyone still connected).
    pub fn ramp_hold(n: u32, rate: f64, hold: f64) -> Schedule {
        Schedule {
            stages: vec![
                Stage {
                    target: n,
                    duration: Secs(f64::from(n) / rate.max(0.001)),
                },
                Stage {
                    target: n,
                    duration: Secs(hold),
                },
            ],
        }
    }

    /// Listeners wanted at `t` seconds after the start (fractional: listener ids below it are
    /// on); the last target after the end.
    pub fn target_at(&self, t: f64) -> f64 {
        let mut from = 0.0f64;
        let mut start = 0.0f64;
        for s in &self.stages {
            let to = f64::from(s.target);
            let d = s.duration.0;
            if t < start + d {
                let k = if d > 0.0 { (t - start) / d } else { 1.0 };
                return from + (to - from) * k.clamp(0.0, 1.0);
            }
            from = to;
            start += d;
        }
        from
    }

    /// The whole schedule's length (s).
    pub fn total_secs(&self) -> f64 {
        self.stages.iter().map(|s| s.duration.0).sum()
    }

    /// The largest target (listeners): how many listener ids the schedule ever uses.
    pub fn peak(&self) -> u32 {
        self.stages.iter().map(|s| s.target).max().unwrap_or(0)
    }

    /// The stage `t` seconds after the start falls in (0-based; the last one after the end).
    pub fn stage_at(&self, t: f64) -> usize {
        let mut start = 0.0;
        for (i, s) in self.stages.iter().enumerate() {
            start += s.duration.0;
            if t < start {
                return i;
            }
        }
        self.stages.len().saturating_sub(1)
    }

    /// Whether second `second` (`[second, second + 1)`) is a hold second: within one stage
    /// whose target is that of the stage before (nothing ramps) and above 0.
    pub fn is_hold_second(&self, second: u32) -> bool {
        let (a, b) = (f64::from(second), f64::from(second) + 1.0);
        if b > self.total_secs() + 1e-9 {
            return false;
        }
        let i = self.stage_at(a);
        if self.stage_at(b - 1e-6) != i {
            return false;
        }
        let prev = if i == 0 { 0 } else { self.stages[i - 1].target };
        let s = self.stages[i];
        s.target > 0 && s.target == prev
    }

    /// The same stages with every target multiplied by `share` (0 to 1) and rounded: a group's
    /// part of the run's stages.
    pub fn scaled(&self, share: f64) -> Schedule {
        Schedule {
            stages: self
                .stages
                .iter()
                .map(|s| Stage {
                    target: (f64::from(s.target) * share).round() as u32,
                    duration: s.duration,
                })
                .collect(),
        }
    }

    /// Checks that there is a stage, every duration is finite, and some target is above 0.
    ///
    /// Errors: the reason in words.
    pub fn validate(&self) -> Result<(), String> {
        if self.stages.is_empty() {
            return Err("no stage".into());
        }
        if self
            .stages
            .iter()
            .any(|s| !s.duration.0.is_finite() || s.duration.0 < 0.0)
        {
            return Err("a stage's duration must be a finite, positive time".into());
        }
        if self.peak() == 0 {
            return Err("every stage's target is 0: no listener would start".into());
        }
        if self.total_secs() <= 0.0 {
            return Err("the stages last 0 s".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(target: u32, d: f64) -> Stage {
        Stage {
            target,
            duration: Secs(d),
        }
    }

    #[test]
    fn stages_ramp_linearly_from_the_previous_target() {
        let s = Schedule {
            stages: vec![st(100, 10.0), st(100, 20.0), st(300, 10.0), st(0, 5.0)],
        };
        assert_eq!(s.target_at(0.0), 0.0);
        assert_eq!(s.target_at(5.0), 50.0);
        assert_eq!(s.target_at(15.0), 100.0);
        assert_eq!(s.target_at(35.0), 200.0);
        assert_eq!(s.target_at(42.5), 150.0);
        assert_eq!(s.target_at(99.0), 0.0);
        assert_eq!((s.total_secs(), s.peak()), (45.0, 300));
        assert_eq!(
            (s.stage_at(9.9), s.stage_at(10.0), s.stage_at(100.0)),
            (0, 1, 3)
        );
        // Hold seconds: inside the flat stage only.
        let holds: Vec<u32> = (0..46).filter(|&x| s.is_hold_second(x)).collect();
        assert_eq!(holds, (10..30).collect::<Vec<u32>>());
        assert_eq!(s.scaled(0.25).stages[2].target, 75);
    }

    #[test]
    fn k6_stage_flags_parse() {
        assert_eq!("30s:2000".parse::<Stage>().unwrap(), st(2000, 30.0));
        assert_eq!("1m:0".parse::<Stage>().unwrap(), st(0, 60.0));
        assert!("30s".parse::<Stage>().is_err());
        assert!("x:1".parse::<Stage>().is_err());
        let r = Schedule::ramp_hold(1000, 500.0, 30.0);
        assert_eq!(r.total_secs(), 32.0);
        assert!(r.validate().is_ok());
        assert!(Schedule::default().validate().is_err());
        assert!(Schedule {
            stages: vec![st(0, 3.0)]
        }
        .validate()
        .is_err());
    }
}
