//! How exact the bench's merged percentiles are (docs/BENCHMARKS.md, issue 37): one million
//! latencies from a heavy-tailed distribution (lognormal body, a 1 % tail up to 10 s), recorded
//! by 8 "workers" into the bench's HDR histograms, sent through their wire format (base64 V2)
//! and merged, against the exact percentiles of all values sorted; and, for comparison, what
//! the bench's former log-bucket histogram (10 buckets a decade, each value read as its
//! bucket's upper edge) would have said.
//!
//! `cargo run --release -p throng-bench --example percentiles`

use throng_bench::stats::Hist;

fn main() {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let n = 1_000_000usize;
    let workers = 8;
    let mut all = Vec::with_capacity(n);
    let mut parts: Vec<Hist> = (0..workers).map(|_| Hist::new()).collect();
    for i in 0..n {
        // Box-Muller: a lognormal around 2 ms, and 1 % of values 100 ms to 10 s.
        let (u1, u2) = (next().max(1e-12), next());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let mut us = (2000.0 * (0.8 * z).exp()) as u64;
        if next() < 0.01 {
            us = (100_000.0 * 100f64.powf(next())) as u64;
        }
        let us = us.max(1);
        all.push(us);
        parts[i % workers].record_us(us);
    }
    let mut merged = Hist::new();
    for p in &parts {
        merged.merge(&Hist::from_base64(&p.to_base64()).expect("wire format"));
    }
    all.sort_unstable();
    let exact = |q: f64| {
        let rank = ((q * all.len() as f64).ceil() as usize).clamp(1, all.len());
        all[rank - 1] as f64 / 1000.0
    };
    // The former histogram: 10 log buckets a decade from 10 µs, read as the bucket's upper edge.
    let log_bucket = |q: f64| {
        let v = exact(q) * 1000.0;
        let i = ((v / 10.0).log10() * 10.0).floor();
        10.0 * 10f64.powf((i + 1.0) / 10.0) / 1000.0
    };
    println!(
        "| percentile | exact (ms) | merged HDR (ms) | error | former log buckets (ms) | error |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let mut worst = 0f64;
    for (label, q) in [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p99.9", 0.999),
        ("max", 1.0),
    ] {
        let e = exact(q);
        let h = merged.quantile_ms(q).expect("values");
        let l = log_bucket(q);
        let err = (h - e) / e * 100.0;
        worst = worst.max(err.abs());
        println!(
            "| {label} | {e:.3} | {h:.3} | {err:+.3} % | {l:.3} | {:+.1} % |",
            (l - e) / e * 100.0
        );
    }
    println!(
        "\n{} values over {workers} workers, merged: count {} (exact), largest error {worst:.3} %; p99 ≤ max: {}",
        n,
        merged.count(),
        merged.quantile_ms(0.99) <= merged.max_ms()
    );
}
