//! The front door's decisions, pure: what to do with a listener's `GET`/`HEAD` on a mount,
//! from plain values only (no I/O, no `ServerCtx`, no clock). The executor (`mod.rs`) asks
//! [`find`] and then [`serve`] again after each act it is told to take, recording what the act
//! learnt, until the answer is final; each act that changes the server's state (an on-demand
//! relay started, an edge counted, a listener slot taken) is taken only when a decision names
//! it, in the order Icecast 2.4.4 `auth.c:add_listener_to_source` takes it:
//!
//! 1. [`find`]: the path must be a canonical mount name; then the requested mount, live; its
//!    on-demand relay, started and awaited; the first live mount along its fallback chain; an
//!    on-demand relay in that chain, started and awaited. Nothing found: a `.m3u`/`.xspf` path
//!    gets its playlist, any other `404`.
//! 2. [`serve`], with a mount found: the redirect of every listener (`[cluster] redirect =
//!    "all"`), authentication, Safari's `Range: bytes=0-1` probe, `HEAD`, a listener slot
//!    (`max-listeners`, then `fallback-when-full`, then an edge with room, then `403`), and
//!    the join.

use throng_proto::http::RequestHead;
use throng_proto::listener_head::PROBE_RANGE;

/// What the request head says, read once (all plain flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Request {
    /// The path is a canonical mount name (`throng_proto::mount_name::is_canonical`); any
    /// other is never looked up (`/a/../b.mp3` is not `/b.mp3`; Icecast 2.4.4 refuses it).
    pub canonical: bool,
    /// The path ends `.m3u` or `.xspf` (`admin/playlist.rs`): served as the playlist of the
    /// mount it names when no mount has the path itself.
    pub playlist: bool,
    /// The method is `HEAD`: the response head alone, no listener counted.
    pub head_only: bool,
    /// Safari's probe `Range: bytes=0-1` ([`PROBE_RANGE`]).
    pub range_probe: bool,
    /// `Icy-MetaData` with a non-zero value: ICY metadata wanted.
    pub wants_icy: bool,
}

impl Request {
    /// Reads the flags of listener request `head`.
    pub fn of(head: &RequestHead) -> Self {
        Self {
            canonical: throng_proto::mount_name::is_canonical(&head.path),
            playlist: crate::admin::playlist::is_playlist(&head.path),
            head_only: head.method == "HEAD",
            range_probe: is_range_probe(head),
            wants_icy: wants_icy(head),
        }
    }
}

/// Whether the request asks for ICY metadata (`Icy-MetaData` with a non-zero value).
pub fn wants_icy(head: &RequestHead) -> bool {
    head.header("icy-metadata")
        .is_some_and(|v| v.trim().parse::<i64>().is_ok_and(|n| n != 0))
}

/// Whether the request is Safari's probe `Range: bytes=0-1` ([`PROBE_RANGE`]).
pub fn is_range_probe(head: &RequestHead) -> bool {
    head.header("range")
        .is_some_and(|r| r.trim().eq_ignore_ascii_case(PROBE_RANGE))
}

/// Where a mount to serve is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// The requested mount itself, live (registered and not ended).
    Requested,
    /// The first live mount along the requested mount's fallback chain.
    Chain,
}

/// What the search for the mount to serve has learnt: per step, `None` until taken, then
/// whether it found a mount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Search {
    /// The requested mount, live.
    pub requested: Option<bool>,
    /// The requested mount after its on-demand relay was asked to start and awaited (`false`
    /// also when it is no on-demand relay, or did not come up in time).
    pub requested_on_demand: Option<bool>,
    /// A live mount along the fallback chain.
    pub chain: Option<bool>,
    /// The chain after an on-demand relay in it was asked to start and awaited.
    pub chain_on_demand: Option<bool>,
}

impl Search {
    /// Records what [`Find::Look`] at `place` learnt.
    pub fn looked(&mut self, place: Where, found: bool) {
        match place {
            Where::Requested => self.requested = Some(found),
            Where::Chain => self.chain = Some(found),
        }
    }

    /// Records what [`Find::AwaitOnDemand`] at `place` learnt.
    pub fn awaited(&mut self, place: Where, found: bool) {
        match place {
            Where::Requested => self.requested_on_demand = Some(found),
            Where::Chain => self.chain_on_demand = Some(found),
        }
    }

    /// Whether some step found a mount.
    fn found(&self) -> bool {
        [
            self.requested,
            self.requested_on_demand,
            self.chain,
            self.chain_on_demand,
        ]
        .contains(&Some(true))
    }
}

/// Why a listener request is refused, with its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The path is no canonical mount name: `404`, never looked up.
    NotCanonical,
    /// No mount to serve and no playlist: `404`.
    NoMount,
    /// The mount (and any fallback) has no room and no edge takes the listener: `403`, as
    /// Icecast 2.4.4 answers `max-listeners`.
    Full,
}

impl Refusal {
    /// The HTTP status of the answer.
    pub fn status(self) -> u16 {
        match self {
            Refusal::NotCanonical | Refusal::NoMount => 404,
            Refusal::Full => 403,
        }
    }

    /// The headers of the answer, before those every reply has.
    pub fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Refusal::NotCanonical | Refusal::NoMount => &[("Content-Type", "text/plain")],
            Refusal::Full => &[],
        }
    }

    /// The body of the answer, as Icecast 2.4.4 words it.
    pub fn body(self) -> &'static str {
        match self {
            Refusal::NotCanonical | Refusal::NoMount => {
                "The file you requested could not be found\n"
            }
            Refusal::Full => "max listeners reached\n",
        }
    }
}

/// The next thing to do while looking for the mount to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Find {
    /// Final: answer the refusal and close.
    Refuse(Refusal),
    /// Look for a live mount at the place, record it with [`Search::looked`], decide again.
    Look(Where),
    /// Ask an on-demand relay at the place to start; if one was, wait for a live mount there
    /// (at most `ON_DEMAND_WAIT_MS`); record it with [`Search::awaited`], decide again.
    AwaitOnDemand(Where),
    /// Final: serve the playlist (`.m3u`/`.xspf`) of the mount the path names.
    ServePlaylist,
    /// A mount was found: go on with [`serve`].
    Found,
}

/// Decides the next step of the search for the mount to serve `req`, given what `search` has
/// learnt. An on-demand relay is started even when its fallback is live: Icecast 2.4.4
/// `source_find_mount` stops at a reserved on-demand relay rather than following its
/// fallback; the fallback serves the listener only if the relay does not come up in time.
pub fn find(req: &Request, search: &Search) -> Find {
    if !req.canonical {
        return Find::Refuse(Refusal::NotCanonical);
    }
    if search.found() {
        return Find::Found;
    }
    match search {
        Search {
            requested: None, ..
        } => Find::Look(Where::Requested),
        Search {
            requested_on_demand: None,
            ..
        } => Find::AwaitOnDemand(Where::Requested),
        Search { chain: None, .. } => Find::Look(Where::Chain),
        Search {
            chain_on_demand: None,
            ..
        } => Find::AwaitOnDemand(Where::Chain),
        _ if req.playlist => Find::ServePlaylist,
        _ => Find::Refuse(Refusal::NoMount),
    }
}

/// Whether the listener has a slot, as learnt by [`Serve::TakeSlot`] and
/// [`Serve::TakeFallbackSlot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// A slot was taken on the mount found.
    Taken,
    /// The mount found is full (`max-listeners`); whether its settings say
    /// `fallback-when-full`.
    Full {
        /// `fallback-when-full` of the full mount.
        fallback_when_full: bool,
    },
    /// The mount was full and a live fallback of its format took the listener (the first with
    /// room, as Icecast 2.4.4 walks up to 10 full mounts); it is now the mount served.
    Fallback,
    /// The mount was full and no live fallback has room.
    FallbacksFull,
}

/// What is known once a mount was found. `icy_format` follows the mount served (a fallback
/// taking a listener of a full mount may be Ogg).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    /// The mount served carries ICY metadata (its format supports it).
    pub icy_format: bool,
    /// The edge for every listener (`redirect = "all"`): `None` until asked, then the
    /// `Location` of an edge with room, if any.
    pub edge_for_all: Option<Option<String>>,
    /// Authentication admitted the listener (a refusal is answered by the act itself).
    pub admitted: bool,
    /// The listener's slot: `None` until taken.
    pub room: Option<Room>,
    /// The edge for a listener the origin has no room for: `None` until asked, then the
    /// `Location` of an edge with room, if any.
    pub edge_when_full: Option<Option<String>>,
}

impl Served {
    /// Nothing learnt yet about a mount whose format does (`icy_format`) or does not carry ICY
    /// metadata.
    pub fn new(icy_format: bool) -> Self {
        Self {
            icy_format,
            ..Self::default()
        }
    }
}

/// The next thing to do with a listener request once a mount was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serve {
    /// Ask the cluster for an edge with room (`full`: the origin has none; else whether the
    /// redirect mode sends every listener), record it in [`Served::edge_for_all`] or
    /// [`Served::edge_when_full`], decide again. Counts the edge as sent one listener.
    AskEdge {
        /// Whether the origin has no room for the listener.
        full: bool,
    },
    /// Final: `302 Found` to an edge, `Location` as given (`cluster/redirect.rs`).
    Redirect {
        /// The `Location` header's value.
        location: String,
        /// Whether the origin had no room for the listener.
        full: bool,
    },
    /// Authenticate the listener on the requested mount; a refusal is answered there (`401`,
    /// `403`, ... as `auth/` says) and is final; else set [`Served::admitted`], decide again.
    Authenticate,
    /// Final: Safari's probe gets `206` and the first 2 bytes, no listener counted.
    AnswerProbe,
    /// Final: the response head alone, `icy`: with `icy-metaint`.
    AnswerHead {
        /// Whether the head announces ICY metadata.
        icy: bool,
    },
    /// Take a slot on the mount found (`max-listeners`), record [`Room::Taken`] or
    /// [`Room::Full`], decide again.
    TakeSlot,
    /// Take a slot on the first live fallback with room, serving that instead; record
    /// [`Room::Fallback`] (and the fallback's format) or [`Room::FallbacksFull`], decide again.
    TakeFallbackSlot,
    /// Final: refused (only [`Refusal::Full`] here).
    Refuse(Refusal),
    /// Final: the response head, the intro and the hand-over to a fan-out shard; `icy`: ICY
    /// metadata interleaved.
    Join {
        /// Whether the listener gets ICY metadata.
        icy: bool,
    },
}

/// Decides the next step with a listener request `req` whose mount was found, given what
/// `served` has learnt.
pub fn serve(req: &Request, served: &Served) -> Serve {
    // A pure director (`[cluster] redirect = "all"`) sends every listener to an edge.
    match &served.edge_for_all {
        None => return Serve::AskEdge { full: false },
        Some(Some(location)) => {
            return Serve::Redirect {
                location: location.clone(),
                full: false,
            }
        }
        Some(None) => {}
    }
    if !served.admitted {
        return Serve::Authenticate;
    }
    if req.range_probe {
        return Serve::AnswerProbe;
    }
    let icy = req.wants_icy && served.icy_format;
    if req.head_only {
        return Serve::AnswerHead { icy };
    }
    match served.room {
        None => Serve::TakeSlot,
        Some(Room::Full {
            fallback_when_full: true,
        }) => Serve::TakeFallbackSlot,
        Some(Room::Taken | Room::Fallback) => Serve::Join { icy },
        // An edge with room takes it (Icecast-KH `master-redirect`), else `403`.
        Some(Room::Full { .. } | Room::FallbacksFull) => match &served.edge_when_full {
            None => Serve::AskEdge { full: true },
            Some(Some(location)) => Serve::Redirect {
                location: location.clone(),
                full: true,
            },
            Some(None) => Serve::Refuse(Refusal::Full),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get() -> Request {
        Request {
            canonical: true,
            ..Request::default()
        }
    }

    /// Runs [`find`] with every step finding nothing: the steps asked for, then the answer.
    fn steps_when_nothing(req: &Request) -> (Vec<Find>, Find) {
        let mut search = Search::default();
        let mut steps = Vec::new();
        loop {
            let step = find(req, &search);
            match step {
                Find::Look(w) => search.looked(w, false),
                Find::AwaitOnDemand(w) => search.awaited(w, false),
                last => return (steps, last),
            }
            steps.push(step);
        }
    }

    #[test]
    fn a_path_that_is_no_canonical_mount_name_is_refused_unlooked() {
        let req = Request {
            canonical: false,
            playlist: true,
            ..get()
        };
        assert_eq!(
            find(&req, &Search::default()),
            Find::Refuse(Refusal::NotCanonical)
        );
        let r = Refusal::NotCanonical;
        assert_eq!(
            (r.status(), r.body()),
            (404, "The file you requested could not be found\n")
        );
        assert_eq!(r.headers(), &[("Content-Type", "text/plain")]);
    }

    #[test]
    fn the_search_goes_requested_on_demand_chain_on_demand_in_that_order() {
        let req = get();
        let mut s = Search::default();
        assert_eq!(find(&req, &s), Find::Look(Where::Requested));
        s.looked(Where::Requested, false);
        // The on-demand relay first, even when a fallback is live (2.4.4 `source_find_mount`).
        assert_eq!(find(&req, &s), Find::AwaitOnDemand(Where::Requested));
        s.awaited(Where::Requested, false);
        assert_eq!(find(&req, &s), Find::Look(Where::Chain));
        s.looked(Where::Chain, false);
        assert_eq!(find(&req, &s), Find::AwaitOnDemand(Where::Chain));
        s.awaited(Where::Chain, false);
        assert_eq!(find(&req, &s), Find::Refuse(Refusal::NoMount));
        assert_eq!(Refusal::NoMount.status(), 404);
    }

    #[test]
    fn any_step_that_finds_a_mount_ends_the_search() {
        let req = get();
        let mut s = Search::default();
        s.looked(Where::Requested, true);
        assert_eq!(find(&req, &s), Find::Found);
        let mut s = Search::default();
        s.looked(Where::Requested, false);
        s.awaited(Where::Requested, true);
        assert_eq!(find(&req, &s), Find::Found);
        s.awaited(Where::Requested, false);
        s.looked(Where::Chain, true);
        assert_eq!(find(&req, &s), Find::Found);
        s.looked(Where::Chain, false);
        s.awaited(Where::Chain, true);
        assert_eq!(find(&req, &s), Find::Found);
    }

    #[test]
    fn a_playlist_path_with_no_mount_gets_the_playlist() {
        let req = Request {
            playlist: true,
            ..get()
        };
        let (_, last) = steps_when_nothing(&req);
        assert_eq!(last, Find::ServePlaylist);
        let (steps, last) = steps_when_nothing(&get());
        assert_eq!(steps.len(), 4);
        assert_eq!(last, Find::Refuse(Refusal::NoMount));
    }

    /// What is learnt once edges, auth and a slot all went the plain way.
    fn admitted(icy_format: bool) -> Served {
        Served {
            icy_format,
            edge_for_all: Some(None),
            admitted: true,
            ..Served::default()
        }
    }

    #[test]
    fn every_listener_is_first_offered_to_an_edge() {
        let req = get();
        let mut s = Served::new(false);
        assert_eq!(serve(&req, &s), Serve::AskEdge { full: false });
        s.edge_for_all = Some(Some("http://edge:8000/live".into()));
        assert_eq!(
            serve(&req, &s),
            Serve::Redirect {
                location: "http://edge:8000/live".into(),
                full: false
            }
        );
        s.edge_for_all = Some(None);
        assert_eq!(serve(&req, &s), Serve::Authenticate);
    }

    #[test]
    fn the_range_probe_is_answered_after_auth_and_before_head_or_slot() {
        let req = Request {
            range_probe: true,
            head_only: true,
            ..get()
        };
        let mut s = admitted(true);
        s.admitted = false;
        assert_eq!(serve(&req, &s), Serve::Authenticate);
        s.admitted = true;
        assert_eq!(serve(&req, &s), Serve::AnswerProbe);
    }

    #[test]
    fn head_gets_the_head_with_icy_only_when_wanted_and_carried() {
        for (wants, carried) in [(false, false), (true, false), (false, true), (true, true)] {
            let req = Request {
                head_only: true,
                wants_icy: wants,
                ..get()
            };
            assert_eq!(
                serve(&req, &admitted(carried)),
                Serve::AnswerHead {
                    icy: wants && carried
                }
            );
        }
    }

    #[test]
    fn a_slot_on_the_mount_joins() {
        let req = Request {
            wants_icy: true,
            ..get()
        };
        let mut s = admitted(true);
        assert_eq!(serve(&req, &s), Serve::TakeSlot);
        s.room = Some(Room::Taken);
        assert_eq!(serve(&req, &s), Serve::Join { icy: true });
    }

    #[test]
    fn a_full_mount_with_fallback_when_full_tries_its_fallbacks() {
        let req = Request {
            wants_icy: true,
            ..get()
        };
        let mut s = admitted(true);
        s.room = Some(Room::Full {
            fallback_when_full: true,
        });
        assert_eq!(serve(&req, &s), Serve::TakeFallbackSlot);
        // The fallback taking it is Ogg: no ICY metadata.
        s.room = Some(Room::Fallback);
        s.icy_format = false;
        assert_eq!(serve(&req, &s), Serve::Join { icy: false });
    }

    #[test]
    fn a_full_mount_sends_to_an_edge_with_room_else_refuses() {
        let req = get();
        for room in [
            Room::Full {
                fallback_when_full: false,
            },
            Room::FallbacksFull,
        ] {
            let mut s = admitted(false);
            s.room = Some(room);
            assert_eq!(serve(&req, &s), Serve::AskEdge { full: true });
            s.edge_when_full = Some(Some("http://e/x".into()));
            assert_eq!(
                serve(&req, &s),
                Serve::Redirect {
                    location: "http://e/x".into(),
                    full: true
                }
            );
            s.edge_when_full = Some(None);
            assert_eq!(serve(&req, &s), Serve::Refuse(Refusal::Full));
        }
        let r = Refusal::Full;
        assert_eq!((r.status(), r.body()), (403, "max listeners reached\n"));
        assert!(r.headers().is_empty());
    }

    #[test]
    fn request_flags_come_from_the_head() {
        let (head, _) = throng_proto::http::parse_request_head(
            b"HEAD /x/../live.m3u HTTP/1.0\r\nIcy-MetaData: 1\r\nRange:  Bytes=0-1 \r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            Request::of(&head),
            Request {
                canonical: false,
                playlist: true,
                head_only: true,
                range_probe: true,
                wants_icy: true,
            }
        );
        let (head, _) = throng_proto::http::parse_request_head(
            b"GET /live HTTP/1.0\r\nIcy-MetaData: 0\r\nRange: bytes=0-\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            Request::of(&head),
            Request {
                canonical: true,
                ..Request::default()
            }
        );
    }
}
