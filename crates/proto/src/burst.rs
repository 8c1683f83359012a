//! Burst-on-connect alignment: where in a mount's queue a new listener starts.
//!
//! As Icecast 2.4.4 `format.c:find_client_start`: the burst point trails the newest byte by at
//! most `burst-size` bytes, and the listener joins at the first sync point (frame or page start)
//! at or after it, so a decoder never starts mid-frame. With no such point (or a burst of 0), the
//! listener joins at the live edge.

/// Returns the absolute stream offset (bytes since the mount started) where a new listener
/// starts: the first of `sync_points` (ascending offsets) that is ≥ `head - burst`, or `head`
/// (the next byte to be produced) when none is.
pub fn join_offset(sync_points: impl IntoIterator<Item = u64>, head: u64, burst: u64) -> u64 {
    let burst_point = head.saturating_sub(burst);
    sync_points
        .into_iter()
        .find(|&s| s >= burst_point && s < head)
        .unwrap_or(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_at_first_sync_point_inside_the_burst() {
        let syncs = [0u64, 1000, 2000, 3000, 4000];
        assert_eq!(join_offset(syncs, 5000, 2500), 3000);
        assert_eq!(join_offset(syncs, 5000, 3000), 2000);
        assert_eq!(join_offset(syncs, 5000, 100_000), 0);
    }

    #[test]
    fn zero_burst_or_no_sync_point_joins_live() {
        let syncs = [0u64, 1000];
        assert_eq!(join_offset(syncs, 5000, 0), 5000);
        assert_eq!(join_offset(syncs, 5000, 500), 5000);
        assert_eq!(join_offset(std::iter::empty(), 0, 65536), 0);
    }
}
