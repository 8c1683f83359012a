//! Criterion benchmark of the per-listener write path (`write_path::write_due`): plan one
//! second of a 64 kbit/s stream over shared chunks, build the iovec, "write" it to a sink that
//! takes everything, and advance the cursor. This is Throng's user-space cost per listener per
//! second at the default write interval; the kernel's cost of the real `writev` comes on top.
//! Run: `cargo bench -p throng-server --bench write_path`.

// `criterion_group!` expands to an undocumented `pub fn benches`.
#![allow(missing_docs)]

mod common;

use std::io::sink;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use throng_server::bench_api::{write_due, Written, MAX_WRITE_BYTES};

fn bench(c: &mut Criterion) {
    let snapshot = common::snapshot(64);
    let icy = common::icy();
    let mut kinds = Vec::new();
    for (name, icy_every) in [("plain", 0), ("icy", 1)] {
        c.bench_function(&format!("write_due/1s@64kbps/{name}"), |b| {
            b.iter_batched_ref(
                || common::listeners(1, &snapshot, icy_every).pop().unwrap(),
                |cursor| {
                    let w = write_due(sink(), cursor, &snapshot, &icy, MAX_WRITE_BYTES, &mut kinds);
                    assert!(matches!(w, Written::Bytes { whole: true, .. }));
                },
                BatchSize::SmallInput,
            )
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
