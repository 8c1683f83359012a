//! One page of a listing of the audience (admin `listclients`, the JSON API's listeners, the
//! admin UI's mount page): the members with ids above `after`, at most `limit` of them, in id
//! order (keyset paging: a client asks for the next page with the last id it got). Each path
//! (fan-out shards, HLS sessions, WHEP engines) keeps only its page while it walks its members
//! ([`take_page`]), so a listing costs the server memory for one page, never for its whole
//! audience (204,000 flooded HLS sessions once made one `listclients` grow it by 6.2 GB).

use std::collections::BinaryHeap;

use crate::audience::ListenerRow;

/// Most members in one page, and the default.
pub const MAX_PAGE: usize = 5000;

/// Which members a listing returns: ids above `after`, at most `limit`, ascending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Members with an id above this one (0: from the first).
    pub after: u64,
    /// At most this many (at least 1, at most [`MAX_PAGE`]).
    pub limit: usize,
}

impl Page {
    /// The first page of the default size.
    pub const FIRST: Page = Page {
        after: 0,
        limit: MAX_PAGE,
    };

    /// The page the query parameters `after` and `limit` ask for (missing, unparsable or out of
    /// range values fall back to the first page and [`MAX_PAGE`]).
    pub fn from_params(after: Option<&str>, limit: Option<&str>) -> Page {
        let after = after.and_then(|a| a.trim().parse().ok()).unwrap_or(0);
        let limit = limit
            .and_then(|l| l.trim().parse::<usize>().ok())
            .map_or(MAX_PAGE, |l| l.clamp(1, MAX_PAGE));
        Page { after, limit }
    }

    /// The page holding only member `id` (whether a mount has it: `killclient`).
    pub fn only(id: u64) -> Page {
        Page {
            after: id.saturating_sub(1),
            limit: 1,
        }
    }
}

/// The rows of `page` among `rows`, sorted by id, holding at most `page.limit` (+1) rows at any
/// time however many `rows` yields (rows are made as the iterator is walked).
pub fn take_page(rows: impl IntoIterator<Item = ListenerRow>, page: Page) -> Vec<ListenerRow> {
    /// A row ordered by id alone (the heap keeps the largest on top, to drop it first).
    struct ById(ListenerRow);
    impl PartialEq for ById {
        fn eq(&self, other: &Self) -> bool {
            self.0.id == other.0.id
        }
    }
    impl Eq for ById {}
    impl PartialOrd for ById {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for ById {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            self.0.id.cmp(&other.0.id)
        }
    }
    let limit = page.limit.max(1);
    let mut heap: BinaryHeap<ById> = BinaryHeap::with_capacity(limit.min(1024) + 1);
    for r in rows {
        if r.id <= page.after {
            continue;
        }
        if heap.len() == limit && heap.peek().is_some_and(|top| top.0.id < r.id) {
            continue;
        }
        heap.push(ById(r));
        if heap.len() > limit {
            heap.pop();
        }
    }
    heap.into_sorted_vec().into_iter().map(|r| r.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audience::AudiencePath;

    fn row(id: u64) -> ListenerRow {
        ListenerRow {
            path: AudiencePath::Icy,
            id,
            ip: "192.0.2.1".parse().unwrap(),
            agent: None,
            referer: None,
            user: None,
            connected_secs: 0,
            mount: "/a".into(),
            requested_mount: "/a".into(),
            lag_bytes: 0,
            sent: 0,
        }
    }

    fn ids(rows: &[ListenerRow]) -> Vec<u64> {
        rows.iter().map(|r| r.id).collect()
    }

    #[test]
    fn a_page_is_the_smallest_ids_after_the_key_in_order() {
        let all = [9u64, 3, 7, 1, 5, 2, 8];
        let page = |after, limit| ids(&take_page(all.map(row), Page { after, limit }));
        assert_eq!(page(0, 3), vec![1, 2, 3]);
        assert_eq!(page(3, 3), vec![5, 7, 8]);
        assert_eq!(page(8, 3), vec![9]);
        assert_eq!(page(9, 3), Vec::<u64>::new());
        assert_eq!(page(0, 100), vec![1, 2, 3, 5, 7, 8, 9]);
        assert_eq!(ids(&take_page(all.map(row), Page::only(7))), vec![7]);
        assert_eq!(ids(&take_page(all.map(row), Page::only(6))), vec![7]);
    }

    #[test]
    fn query_parameters_are_bounded() {
        assert_eq!(Page::from_params(None, None), Page::FIRST);
        assert_eq!(
            Page::from_params(Some("42"), Some("10")),
            Page {
                after: 42,
                limit: 10
            }
        );
        assert_eq!(Page::from_params(Some("x"), Some("0")).limit, 1);
        assert_eq!(Page::from_params(None, Some("999999999")).limit, MAX_PAGE);
    }
}
