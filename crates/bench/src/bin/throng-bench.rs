//! `throng-bench`: the load generator alone, as `throng-bench bench <run|compare|...>` (the same
//! arguments as `throng bench ...`, so it can re-execute itself as `... bench worker`).

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "throng-bench", version, about = "Throng's load generator")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The load generator.
    Bench(throng_bench::BenchArgs),
}

fn main() -> anyhow::Result<()> {
    let Cmd::Bench(args) = Cli::parse().command;
    throng_bench::run(args)
}
