//! Streamed listings of a mount's audience (issue 28, part 7): `listclients`, `GET
//! /api/v1/mounts/{mount}/listeners` and the admin UI's mount page send their rows as a
//! chunked body, rendered [`CHUNK`] members at a time (`roster::members` keyset pages, each
//! path keeping only its page) while the client reads them. What is listed is fixed when the
//! request arrives: members whose id is below the next id then (a snapshot of the id range;
//! members that join later are left out, members that leave before their chunk is rendered
//! are too). The body is fed through a channel of two chunks, so a listing holds a few chunks
//! of rows whatever the audience, and a client that stops reading stops the walk (dropping the
//! body closes the channel). Without `limit` every member is listed (as Icecast's
//! `listclients`); with `after`/`limit`, one page as before.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;

use crate::audience::page::Page;
use crate::audience::ListenerRow;
use crate::ctx::ServerCtx;

/// Members rendered per chunk of the body.
pub const CHUNK: usize = 1000;

/// Which members a listing covers: ids above `after` and below `upper`, ascending, at most
/// `limit` of them (`None`: all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listing {
    /// Members with an id above this one (0: from the first).
    pub after: u64,
    /// At most this many (at least 1); `None`: every member.
    pub limit: Option<usize>,
    /// Members with an id below this one: the next id when the request arrived.
    pub upper: u64,
}

impl Listing {
    /// The listing the query parameters `after` and `limit` ask for (unparsable values are
    /// ignored: from the first, every member), of members whose id is below `upper`.
    pub fn from_params(after: Option<&str>, limit: Option<&str>, upper: u64) -> Listing {
        Listing {
            after: after.and_then(|a| a.trim().parse().ok()).unwrap_or(0),
            limit: limit
                .and_then(|l| l.trim().parse::<usize>().ok())
                .map(|l| l.max(1)),
            upper,
        }
    }

    /// The page of the next chunk, after member `cursor` with `sent` members listed so far;
    /// `None` when the listing is complete (its `limit` reached, or `cursor` at `upper`).
    pub fn next_page(&self, cursor: u64, sent: usize) -> Option<Page> {
        let left = self
            .limit
            .map_or(CHUNK, |l| l.saturating_sub(sent).min(CHUNK));
        if left == 0 || cursor.saturating_add(1) >= self.upper {
            return None;
        }
        Some(Page {
            after: cursor,
            limit: left,
        })
    }

    /// Whether the walk ends after a chunk of `page` that yielded `got` rows, the last with id
    /// `last`: a short chunk means no member is left, and `last` may reach the snapshot's end.
    fn done_after(&self, page: Page, got: usize, last: u64) -> bool {
        got < page.limit || last.saturating_add(1) >= self.upper
    }
}

/// The body of a listing of mount `mount` on `ctx`: `head`, then each member of `listing`
/// rendered by `render(row, first, out)` into a chunk per [`CHUNK`] members, then `tail`. The
/// rows are produced by a task while the client reads.
pub fn body(
    ctx: Arc<ServerCtx>,
    mount: String,
    listing: Listing,
    head: String,
    render: impl Fn(&ListenerRow, bool, &mut String) + Send + 'static,
    tail: String,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(2);
    tokio::spawn(async move {
        if tx.send(Bytes::from(head)).await.is_err() {
            return;
        }
        let (mut cursor, mut sent) = (listing.after, 0usize);
        while let Some(page) = listing.next_page(cursor, sent) {
            let rows = crate::roster::members(&ctx, Some(&mount), page).await;
            let got = rows.len();
            let mut chunk = String::with_capacity(got * 160);
            for r in rows.iter().take_while(|r| r.id < listing.upper) {
                render(r, sent == 0, &mut chunk);
                sent += 1;
                cursor = r.id;
            }
            let last = rows.last().map_or(cursor, |r| r.id);
            drop(rows);
            if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
            if listing.done_after(page, got, last) {
                break;
            }
        }
        let _ = tx.send(Bytes::from(tail)).await;
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<Bytes, std::convert::Infallible>(b), rx))
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters() {
        let l = Listing::from_params(None, None, 100);
        assert_eq!(
            l,
            Listing {
                after: 0,
                limit: None,
                upper: 100
            }
        );
        let l = Listing::from_params(Some(" 7"), Some("0"), 100);
        assert_eq!((l.after, l.limit), (7, Some(1)));
        let l = Listing::from_params(Some("x"), Some("y"), 100);
        assert_eq!((l.after, l.limit), (0, None));
        assert_eq!(
            Listing::from_params(None, Some("20000"), 1).limit,
            Some(20_000),
            "a page may be larger than one chunk: it is streamed too"
        );
    }

    #[test]
    fn chunks_walk_the_snapshot_then_stop() {
        let all = Listing::from_params(None, None, 5_000);
        assert_eq!(
            all.next_page(0, 0),
            Some(Page {
                after: 0,
                limit: CHUNK
            })
        );
        let p = all.next_page(1_234, 1_000).unwrap();
        assert_eq!((p.after, p.limit), (1_234, CHUNK));
        assert!(!all.done_after(p, CHUNK, 2_500));
        assert!(
            all.done_after(p, CHUNK - 1, 2_500),
            "a short chunk: no one left"
        );
        assert!(all.done_after(p, CHUNK, 4_999), "the snapshot's last id");
        assert_eq!(all.next_page(4_999, 3_000), None);
    }

    #[test]
    fn a_limit_ends_the_listing() {
        let l = Listing::from_params(Some("10"), Some("1500"), u64::MAX);
        let first = l.next_page(10, 0).unwrap();
        assert_eq!((first.after, first.limit), (10, CHUNK));
        let second = l.next_page(2_000, 1_000).unwrap();
        assert_eq!(second.limit, 500);
        assert_eq!(l.next_page(3_000, 1_500), None);
    }
}
