//! Integration tests of `throng-fuzz`: every target runs a few thousand inputs (its corpus and
//! mutations of it) without a crash or hang, so `cargo test --workspace` fuzzes each parser a
//! little on every change; and the harness itself catches a panicking target.

use std::time::Duration;

#[test]
fn every_target_survives_a_short_run() {
    let mut failures = Vec::new();
    for t in throng_fuzz::TARGETS {
        let corpus = throng_fuzz::load_corpus(&throng_fuzz::default_corpus_dir(), t);
        assert!(!corpus.is_empty());
        let opts = throng_fuzz::Options {
            inputs: 3_000,
            seed: 0x5eed,
            time_limit: Duration::from_secs(10),
            crash_dir: None,
            ..throng_fuzz::Options::default()
        };
        let r = throng_fuzz::run(t, &corpus, &opts);
        assert_eq!(r.inputs, 3_000, "{}", t.name);
        for c in r.crashes {
            failures.push(format!("{} input {}: {}", t.name, c.index, c.message));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_target_has_a_committed_corpus() {
    for t in throng_fuzz::TARGETS {
        let dir = throng_fuzz::default_corpus_dir().join(t.name);
        let n = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        assert!(n > 0, "no corpus in {}", dir.display());
    }
}

fn panics_on_bang(data: &[u8]) {
    assert!(!data.contains(&b'!'), "found a bang");
}

fn no_seeds() -> Vec<Vec<u8>> {
    vec![b"hello".to_vec()]
}

#[test]
fn the_harness_records_a_panicking_input_and_goes_on() {
    let t = throng_fuzz::Target {
        name: "bang",
        run: panics_on_bang,
        seeds: no_seeds,
    };
    let corpus = vec![b"hello".to_vec(), b"a!b".to_vec()];
    let opts = throng_fuzz::Options {
        inputs: 50,
        crash_dir: None,
        ..throng_fuzz::Options::default()
    };
    let r = throng_fuzz::run(&t, &corpus, &opts);
    assert!(!r.crashes.is_empty());
    assert_eq!(r.crashes[0].index, 1, "the corpus entry with a bang");
    assert!(r.crashes[0].message.contains("found a bang"));
    assert!(r.inputs >= 2);
}
