//! Execution segments, as k6-operator splits a run over pods: each part of a run (an agent,
//! then a worker of that agent) runs an exact share of every group's listeners, so the parts
//! together run each listener exactly once and every stage's target exactly.
//!
//! A group's listeners are numbered 0, 1, 2, … in the order the stages start them (listener
//! `i` is on while the target is above `i`). A [`Stripe`] deals those numbers out over weighted
//! parts by smooth weighted round-robin (the interleaving nginx uses for weighted upstreams):
//! over any run of numbers each part gets its weight's share, within one, so at every target
//! each part runs its share of the listeners, not a block of them. An [`ExecutionSegment`] is a
//! chain of stripes, one per level (agents, then workers): a listener belongs to the segment
//! when at each level its rank among the listeners of the level above falls to the segment's
//! part.

use serde::{Deserialize, Serialize};

/// Largest period of a stripe's interleaving: weights whose sum is larger are scaled down to it
/// (the shares then hold within 1 in 4,096).
pub const MAX_PERIOD: u32 = 4096;

/// One level of a split: the parts' weights, and which part this one is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stripe {
    /// Every part's weight (any positive integers: capacities, or 1 each for an even split).
    pub weights: Vec<u32>,
    /// This part (an index into `weights`).
    pub index: u32,
}

impl Stripe {
    /// An even split in `parts`, this being part `index`.
    pub fn even(parts: u32, index: u32) -> Stripe {
        Stripe {
            weights: vec![1; parts.max(1) as usize],
            index,
        }
    }

    /// The owner of every position of one period of the interleaving (smooth weighted
    /// round-robin: each step, every part gains its weight, the richest part takes the step
    /// and pays the total).
    pub fn sequence(&self) -> Vec<u16> {
        let mut w: Vec<u64> = self.weights.iter().map(|&x| u64::from(x.max(1))).collect();
        let sum: u64 = w.iter().sum();
        if sum > u64::from(MAX_PERIOD) {
            for x in &mut w {
                *x = (*x * u64::from(MAX_PERIOD) / sum).max(1);
            }
        }
        let total: i64 = w.iter().map(|&x| x as i64).sum();
        let mut current = vec![0i64; w.len()];
        let mut out = Vec::with_capacity(total as usize);
        for _ in 0..total {
            for (c, &x) in current.iter_mut().zip(&w) {
                *c += x as i64;
            }
            // The first part with the largest balance takes the step.
            let mut best = 0;
            for (k, &c) in current.iter().enumerate() {
                if c > current[best] {
                    best = k;
                }
            }
            current[best] -= total;
            out.push(best as u16);
        }
        out
    }
}

/// A chain of stripes (see the module comment); no stripe at all is the whole group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionSegment {
    /// The levels, outermost (agents) first.
    pub levels: Vec<Stripe>,
}

impl ExecutionSegment {
    /// The whole group.
    pub fn whole() -> ExecutionSegment {
        ExecutionSegment::default()
    }

    /// This segment split one level further: part `index` of `weights`.
    pub fn then(&self, stripe: Stripe) -> ExecutionSegment {
        let mut levels = self.levels.clone();
        levels.push(stripe);
        ExecutionSegment { levels }
    }

    /// The listener numbers below `peak` in this segment, ascending.
    pub fn ids(&self, peak: u32) -> Vec<u32> {
        let mut ids: Vec<u32> = (0..peak).collect();
        for stripe in &self.levels {
            let seq = stripe.sequence();
            if seq.is_empty() {
                return Vec::new();
            }
            let me = stripe.index as u16;
            ids = ids
                .iter()
                .enumerate()
                .filter(|(rank, _)| seq[rank % seq.len()] == me)
                .map(|(_, &id)| id)
                .collect();
        }
        ids
    }

    /// How many of `ids` (this segment's, ascending) are on at a group target of `target`
    /// listeners: those numbered below it.
    pub fn on_at(ids: &[u32], target: f64) -> usize {
        ids.partition_point(|&id| f64::from(id) < target)
    }

    /// The share of the group this segment holds (0 to 1), from its weights.
    pub fn share(&self) -> f64 {
        self.levels
            .iter()
            .map(|s| {
                let sum: u64 = s.weights.iter().map(|&w| u64::from(w.max(1))).sum();
                let mine = s.weights.get(s.index as usize).copied().unwrap_or(0).max(1);
                f64::from(mine) / sum.max(1) as f64
            })
            .product()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_partition_the_listeners_at_every_target() {
        let agents = [3u32, 1, 2];
        let workers = [2u32, 1, 3];
        let peak = 10_000;
        let mut all: Vec<Vec<u32>> = Vec::new();
        for (a, &nw) in workers.iter().enumerate() {
            let host = ExecutionSegment::whole().then(Stripe {
                weights: agents.to_vec(),
                index: a as u32,
            });
            for w in 0..nw {
                all.push(host.then(Stripe::even(nw, w)).ids(peak));
            }
        }
        // Every listener in exactly one segment.
        let mut seen: Vec<u32> = all.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..peak).collect::<Vec<u32>>());
        // At every target the segments hold their shares within a couple of listeners, and
        // together exactly the target.
        for target in [1.0, 7.0, 100.0, 999.0, 5000.0, 10_000.0] {
            let on: Vec<usize> = all
                .iter()
                .map(|ids| ExecutionSegment::on_at(ids, target))
                .collect();
            assert_eq!(on.iter().sum::<usize>(), target as usize);
            // Agent 0 (weight 3 of 6) has 2 workers: each about a quarter.
            for &n in &on[..2] {
                assert!((n as f64 - target / 4.0).abs() <= 2.0, "{target}: {on:?}");
            }
        }
    }

    #[test]
    fn smooth_round_robin_interleaves() {
        let s = Stripe {
            weights: vec![5, 1, 1],
            index: 0,
        };
        assert_eq!(s.sequence(), vec![0, 0, 1, 0, 2, 0, 0]);
        // Large weights are scaled to a bounded period.
        let big = Stripe {
            weights: vec![20_000, 20_000, 10_000],
            index: 2,
        };
        let seq = big.sequence();
        assert!(seq.len() <= MAX_PERIOD as usize + 3);
        let share = seq.iter().filter(|&&p| p == 2).count() as f64 / seq.len() as f64;
        assert!((share - 0.2).abs() < 0.01, "{share}");
        assert!((ExecutionSegment::whole().then(big).share() - 0.2).abs() < 1e-9);
        assert_eq!(ExecutionSegment::whole().ids(3), vec![0, 1, 2]);
    }
}
