//! A mutation fuzzer for Throng's parsers that runs on the stable toolchain (no `cargo fuzz`,
//! no nightly, no sanitizers). Each target ([`targets`]) is a function over bytes that drives one
//! parser reading the network or files and asserts cheap invariants (a framer never returns more
//! bytes than it was given; a parsed head serialised again parses the same). The harness
//! ([`run`]) starts from a seed corpus (`crates/fuzz/corpus/<target>/`), mutates entries with a
//! seeded RNG (bit flips, byte inserts and deletes, splices between entries, truncation, repeats
//! of bytes parsers care about such as `\r\n`, `;`, `'`, `0xFF`), runs each input under
//! [`std::panic::catch_unwind`], and flags an input that runs longer than a time limit (a
//! watchdog thread, so a real hang is caught too). Crashes and hangs are saved to
//! `crates/fuzz/crashes/<target>/` with the seed and input number that reproduce them.

pub mod mutate;
pub mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;

pub use targets::{Target, TARGETS};

/// A run stops after this many crashing inputs (they usually share one cause).
pub const MAX_CRASHES: usize = 20;

/// How one fuzzing run is done.
#[derive(Debug, Clone)]
pub struct Options {
    /// Inputs to run (the corpus entries first, unmutated, then mutations).
    pub inputs: u64,
    /// RNG seed: the same seed, corpus and target give the same inputs.
    pub seed: u64,
    /// An input running longer than this is reported as a hang (and the process aborted when it
    /// has not returned after twice as long).
    pub time_limit: Duration,
    /// Where crashing inputs are saved (`<dir>/<target>/`), or `None` to save nothing.
    pub crash_dir: Option<PathBuf>,
    /// Largest input generated, in bytes.
    pub max_len: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            inputs: 10_000,
            seed: 1,
            time_limit: Duration::from_secs(2),
            crash_dir: None,
            max_len: 64 * 1024,
        }
    }
}

/// One input that panicked or ran too long.
#[derive(Debug, Clone)]
pub struct Crash {
    /// Number of the input in the run (0-based), reproducible with the same seed.
    pub index: u64,
    /// The panic message, or `hang: N ms`.
    pub message: String,
    /// The input.
    pub input: Vec<u8>,
    /// Where it was saved, if it was.
    pub saved: Option<PathBuf>,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Report {
    /// Target name.
    pub target: &'static str,
    /// Inputs run.
    pub inputs: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Longest single input, its time and length in bytes. On a loaded machine one input's
    /// wall time includes any time the thread was not scheduled, so the slowest input is run
    /// again three times after the run: see [`Report::slowest_retimed`].
    pub slowest: (Duration, usize),
    /// The shortest of three reruns of the slowest input: its own cost, without scheduling
    /// stalls.
    pub slowest_retimed: Duration,
    /// Inputs that panicked or ran over the time limit.
    pub crashes: Vec<Crash>,
}

impl Report {
    /// Inputs per second over the run.
    pub fn execs_per_sec(&self) -> f64 {
        self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The seed corpus of `target`: every file in `corpus_root/<target>/` (sorted by name), or the
/// target's built-in seeds when there is none (`throng-fuzz <target> --write-seeds` writes them
/// there); never empty.
pub fn load_corpus(corpus_root: &Path, target: &Target) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(corpus_root.join(target.name)) {
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if let Ok(b) = std::fs::read(&p) {
                out.push(b);
            }
        }
    }
    if out.is_empty() {
        out.extend((target.seeds)());
    }
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

/// The crate's own corpus directory (`crates/fuzz/corpus`).
pub fn default_corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// The crate's own crash directory (`crates/fuzz/crashes`).
pub fn default_crash_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crashes")
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that stays silent on fuzzing threads (the harness records the
/// message) and prints as usual elsewhere.
fn install_quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(l) = info.location() {
                LAST_LOCATION.with(|c| *c.borrow_mut() = Some(l.to_string()));
            }
            if !QUIET.with(|q| q.get()) {
                default(info);
            }
        }));
    });
}

fn panic_message(e: &(dyn std::any::Any + Send), loc: Option<String>) -> String {
    let msg = if let Some(s) = e.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".to_owned()
    };
    match loc {
        Some(l) => format!("{msg} (at {l})"),
        None => msg,
    }
}

thread_local! {
    static LAST_LOCATION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Saves a crashing input with a note saying how to reproduce it.
fn save_crash(dir: &Path, target: &str, seed: u64, crash: &Crash) -> Option<PathBuf> {
    let dir = dir.join(target);
    std::fs::create_dir_all(&dir).ok()?;
    let name = format!("seed{seed}-input{}", crash.index);
    let path = dir.join(format!("{name}.bin"));
    std::fs::write(&path, &crash.input).ok()?;
    let note = format!(
        "target: {target}\nseed: {seed}\ninput: {}\nerror: {}\nreproduce: cargo run --release -p throng-fuzz -- {target} --inputs {} --seed {seed}\nor replay the file: cargo run --release -p throng-fuzz -- {target} --replay {}\n",
        crash.index,
        crash.message,
        crash.index + 1,
        path.display()
    );
    std::fs::write(dir.join(format!("{name}.txt")), note).ok()?;
    Some(path)
}

/// Runs `target` on one input, catching a panic: `Err(message)` when it panicked.
pub fn run_one(target: &Target, input: &[u8]) -> Result<(), String> {
    install_quiet_hook();
    QUIET.with(|q| q.set(true));
    LAST_LOCATION.with(|l| *l.borrow_mut() = None);
    let r = catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    QUIET.with(|q| q.set(false));
    r.map_err(|e| panic_message(&*e, LAST_LOCATION.with(|l| l.borrow_mut().take())))
}

/// Fuzzes `target`: the corpus entries, then mutations of them, `opts.inputs` in all.
pub fn run(target: &Target, corpus: &[Vec<u8>], opts: &Options) -> Report {
    install_quiet_hook();
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let start = Instant::now();
    // Watchdog: the input being run and when it started (ns since `start`, 0 = idle).
    let current = Arc::new(Mutex::new(Vec::<u8>::new()));
    let started_ns = Arc::new(AtomicU64::new(0));
    let index_now = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (current, started_ns, index_now, done) = (
            current.clone(),
            started_ns.clone(),
            index_now.clone(),
            done.clone(),
        );
        let limit = opts.time_limit;
        let crash_dir = opts.crash_dir.clone();
        let (name, seed) = (target.name, opts.seed);
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                let s = started_ns.load(Ordering::Relaxed);
                if s == 0 {
                    continue;
                }
                let running = start.elapsed().saturating_sub(Duration::from_nanos(s));
                if running > limit * 2 && started_ns.load(Ordering::Relaxed) == s {
                    // Still the same input: a hang that will not return; record and stop.
                    let crash = Crash {
                        index: index_now.load(Ordering::Relaxed),
                        message: format!("hang: still running after {} ms", running.as_millis()),
                        input: current.lock().map(|c| c.clone()).unwrap_or_default(),
                        saved: None,
                    };
                    let saved = crash_dir
                        .as_deref()
                        .and_then(|d| save_crash(d, name, seed, &crash));
                    eprintln!(
                        "{name}: HANG on input {} ({} bytes), saved to {saved:?}",
                        crash.index,
                        crash.input.len()
                    );
                    std::process::exit(3);
                }
            }
        })
    };

    let mut crashes = Vec::new();
    let mut slowest = (Duration::ZERO, 0usize);
    let mut slowest_input = Vec::new();
    let mut input = Vec::new();
    let mut ran = 0u64;
    for i in 0..opts.inputs {
        ran = i + 1;
        if (i as usize) < corpus.len() {
            input.clear();
            input.extend_from_slice(&corpus[i as usize]);
        } else {
            mutate::mutate(&mut rng, corpus, &mut input, opts.max_len);
        }
        if let Ok(mut c) = current.lock() {
            c.clear();
            c.extend_from_slice(&input);
        }
        index_now.store(i, Ordering::Relaxed);
        let t0 = start.elapsed();
        started_ns.store(t0.as_nanos().max(1) as u64, Ordering::Relaxed);
        let r = run_one(target, &input);
        let took = start.elapsed() - t0;
        started_ns.store(0, Ordering::Relaxed);
        if took > slowest.0 {
            slowest = (took, input.len());
            slowest_input.clone_from(&input);
        }
        let message = match r {
            Err(m) => Some(m),
            Ok(()) if took > opts.time_limit => Some(format!("hang: {} ms", took.as_millis())),
            Ok(()) => None,
        };
        if let Some(message) = message {
            let mut crash = Crash {
                index: i,
                message,
                input: input.clone(),
                saved: None,
            };
            crash.saved = opts
                .crash_dir
                .as_deref()
                .and_then(|d| save_crash(d, target.name, opts.seed, &crash));
            crashes.push(crash);
            if crashes.len() >= MAX_CRASHES {
                break;
            }
        }
    }
    let slowest_retimed = (0..3)
        .map(|_| {
            let t0 = Instant::now();
            let _ = run_one(target, &slowest_input);
            t0.elapsed()
        })
        .min()
        .unwrap_or_default();
    done.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    Report {
        target: target.name,
        inputs: ran,
        elapsed: start.elapsed(),
        slowest,
        slowest_retimed,
        crashes,
    }
}

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
