//! `throng-fuzz`: runs the mutation fuzzer over one target or all of them and prints, per
//! target, the inputs run, executions per second, the slowest input and any crash (saved under
//! `crates/fuzz/crashes/<target>/` with the seed that reproduces it). Exits 1 when an input
//! crashed or hung.
//!
//! ```text
//! throng-fuzz all --inputs 20000
//! throng-fuzz framer_ogg --inputs 10000000 --seed 7
//! throng-fuzz http_request --replay crates/fuzz/crashes/http_request/seed1-input42.bin
//! throng-fuzz list
//! ```

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;

/// Mutation fuzzer of Throng's parsers.
#[derive(Debug, Parser)]
#[command(name = "throng-fuzz")]
struct Args {
    /// A target name, `all`, or `list` (prints the targets).
    target: String,
    /// Inputs to run per target.
    #[arg(long, default_value_t = 100_000)]
    inputs: u64,
    /// RNG seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Per-input time limit in milliseconds (a longer input is reported as a hang).
    #[arg(long, default_value_t = 2000)]
    time_limit_ms: u64,
    /// Replays one saved input instead of fuzzing.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Writes the built-in seeds into the corpus directory (as `builtin-N`), then exits.
    #[arg(long)]
    write_seeds: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.target == "list" {
        for t in throng_fuzz::TARGETS {
            println!("{}", t.name);
        }
        return Ok(());
    }
    let targets: Vec<&throng_fuzz::Target> = if args.target == "all" {
        throng_fuzz::TARGETS.iter().collect()
    } else {
        vec![throng_fuzz::target(&args.target)
            .with_context(|| format!("no target {:?} (try `list`)", args.target))?]
    };
    let corpus_dir = throng_fuzz::default_corpus_dir();
    if args.write_seeds {
        for t in &targets {
            let dir = corpus_dir.join(t.name);
            std::fs::create_dir_all(&dir)?;
            for (i, s) in (t.seeds)().iter().enumerate() {
                std::fs::write(dir.join(format!("builtin-{i}")), s)?;
            }
        }
        return Ok(());
    }
    if let Some(path) = &args.replay {
        let input = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        for t in &targets {
            match throng_fuzz::run_one(t, &input) {
                Ok(()) => println!("{}: ok", t.name),
                Err(m) => bail!("{}: {m}", t.name),
            }
        }
        return Ok(());
    }
    let opts = throng_fuzz::Options {
        inputs: args.inputs,
        seed: args.seed,
        time_limit: Duration::from_millis(args.time_limit_ms),
        crash_dir: Some(throng_fuzz::default_crash_dir()),
        ..throng_fuzz::Options::default()
    };
    let mut failed = false;
    for t in targets {
        let corpus = throng_fuzz::load_corpus(&corpus_dir, t);
        let r = throng_fuzz::run(t, &corpus, &opts);
        println!(
            "{:<14} inputs {:>10}  {:>9.0} execs/s  {:>7.1} s  slowest {:.1} ms ({} bytes; {:.2} ms rerun)  crashes {}",
            r.target,
            r.inputs,
            r.execs_per_sec(),
            r.elapsed.as_secs_f64(),
            r.slowest.0.as_secs_f64() * 1000.0,
            r.slowest.1,
            r.slowest_retimed.as_secs_f64() * 1000.0,
            r.crashes.len()
        );
        for c in &r.crashes {
            failed = true;
            println!(
                "  input {}: {} ({} bytes, saved to {})",
                c.index,
                c.message,
                c.input.len(),
                c.saved
                    .as_deref()
                    .map_or("nowhere".into(), |p| p.display().to_string())
            );
        }
    }
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
