//! Health for probes and balancers (docs/operators.md, "Health and drain"; docs/SCALING.md,
//! "On Kubernetes"): `GET /healthz/live` (the process serves: a Kubernetes liveness probe) and
//! `GET /healthz/ready` (ready for new listeners: a readiness probe, an HAProxy `httpchk`, an
//! nginx Plus `health_check`), both unauthenticated, cheap (a few atomic reads, no lock held
//! long) and answered in JSON. Ready is `200`, not ready `503`, with the reasons:
//! `draining` (`cluster/drain.rs`), `full` (the audience at its capacity: `[cluster] capacity`,
//! else the `clients` limit), and `relay-not-live` for each `[[relay]]` (not on demand) whose
//! mount has no live feed, as an edge's relays of the origin. An audience ledger that is not
//! writing (its database does not answer) is a `warnings` entry, `ledger-not-writing`, with the
//! sessions kept meanwhile: it never makes a server not ready, since every pod shares the one
//! database and taking them all out of service would cut the audience for a bookkeeping fault
//! (issue 42). And `POST /api/v1/drain` (admin): starts a drain.
//!
//! The decision, [`readiness`], is a pure function of what was read.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::admin::auth;
use crate::ctx::ServerCtx;

/// What readiness is decided from.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadinessInput {
    /// A drain has started.
    pub draining: bool,
    /// Audience members on every path now (listeners).
    pub members: u64,
    /// Members the server takes (listeners): `[cluster] capacity`, else the `clients` limit.
    pub capacity: u64,
    /// The `clients` limit is reached (connections of any kind).
    pub clients_full: bool,
    /// Local mounts of `[[relay]]` entries (not on demand) with no live feed.
    pub relays_not_live: Vec<String>,
    /// The audience ledger, when the server keeps one.
    pub ledger: Option<LedgerState>,
}

/// How the audience ledger's writer is doing (`ledger/health.rs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerState {
    /// The last commit succeeded.
    pub writing: bool,
    /// Session starts and ends not committed yet (messages).
    pub pending_sessions: i64,
    /// Seconds since the last commit (`None` before the first).
    pub seconds_since_commit: Option<f64>,
}

/// One reason a server is not ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// A stable key: `draining`, `full`, `relay-not-live`.
    pub key: &'static str,
    /// A sentence for people.
    pub detail: String,
}

/// The readiness answer (the JSON body of `/healthz/ready`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Readiness {
    /// Ready for new listeners (status `200`; else `503`).
    pub ready: bool,
    /// Why not, in the order draining, full, relays; empty when ready.
    pub reasons: Vec<Reason>,
    /// Audience members on every path (listeners).
    pub listeners: u64,
    /// The capacity compared with (listeners).
    pub capacity: u64,
    /// A drain has started.
    pub draining: bool,
    /// What is wrong without making the server not ready (`ledger-not-writing`).
    pub warnings: Vec<Reason>,
    /// The audience ledger's writer, when there is a ledger.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<LedgerState>,
}

/// Decides readiness from `input`: ready when not draining, below capacity (and `clients` not
/// used up) and every static relay live.
pub fn readiness(input: &ReadinessInput) -> Readiness {
    let mut reasons = Vec::new();
    if input.draining {
        reasons.push(Reason {
            key: "draining",
            detail: "draining: new listeners are sent on".into(),
        });
    }
    if input.members >= input.capacity || input.clients_full {
        reasons.push(Reason {
            key: "full",
            detail: format!(
                "{} of {} listeners{}",
                input.members,
                input.capacity,
                if input.clients_full {
                    " (clients limit reached)"
                } else {
                    ""
                }
            ),
        });
    }
    for m in &input.relays_not_live {
        reasons.push(Reason {
            key: "relay-not-live",
            detail: format!("relay {m} has no live feed"),
        });
    }
    let mut warnings = Vec::new();
    if let Some(l) = input.ledger.as_ref().filter(|l| !l.writing) {
        warnings.push(Reason {
            key: "ledger-not-writing",
            detail: format!(
                "the audience ledger's database does not answer; {} session starts and ends kept in memory",
                l.pending_sessions
            ),
        });
    }
    Readiness {
        ready: reasons.is_empty(),
        reasons,
        listeners: input.members,
        capacity: input.capacity,
        draining: input.draining,
        warnings,
        ledger: input.ledger.clone(),
    }
}

/// What [`readiness`] is decided from, read from `ctx` now.
pub fn input(ctx: &ServerCtx) -> ReadinessInput {
    let config = ctx.config();
    let capacity = if config.cluster.capacity > 0 {
        config.cluster.capacity
    } else {
        u64::try_from(ctx.clients.max()).unwrap_or(0)
    };
    let relays_not_live = config
        .relay
        .iter()
        .filter(|r| !r.on_demand)
        .map(|r| r.local().to_owned())
        .filter(|name| ctx.registry.get(name).is_none_or(|m| m.queue.load().ended))
        .collect();
    ReadinessInput {
        draining: ctx.drain.is_draining(),
        members: u64::try_from(crate::roster::counts(ctx).total()).unwrap_or(u64::MAX),
        capacity,
        clients_full: ctx.clients.is_full(),
        relays_not_live,
        ledger: ctx.ledger.as_ref().map(|l| {
            let h = l.health();
            LedgerState {
                writing: !h.is_failing(),
                pending_sessions: h.pending.get(),
                seconds_since_commit: h.seconds_since_commit(crate::ledger::now_ms()),
            }
        }),
    }
}

/// A JSON reply with `Cache-Control: no-store` (a cache must never answer a probe).
fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
    (
        status,
        [
            (axum::http::header::CONTENT_TYPE, "application/json"),
            (axum::http::header::CACHE_CONTROL, "no-store"),
        ],
        text + "\n",
    )
        .into_response()
}

/// `GET /healthz/live`: `200 {"live":true,"uptime_s":…}` while the process serves requests.
pub async fn live(State(ctx): State<Arc<ServerCtx>>) -> Response {
    let uptime = (chrono::Local::now() - ctx.started).num_seconds().max(0);
    json(
        StatusCode::OK,
        &serde_json::json!({ "live": true, "uptime_s": uptime }),
    )
}

/// `GET /healthz/ready`: `200` when ready for new listeners, else `503`; the body is a
/// [`Readiness`] (`{"ready":false,"reasons":[{"key":"draining","detail":"…"}],…}`).
pub async fn ready(State(ctx): State<Arc<ServerCtx>>) -> Response {
    let r = readiness(&input(&ctx));
    let status = if r.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, &r)
}

/// `POST /api/v1/drain` (admin): starts a drain (`cluster/drain.rs`) of `[limits]
/// drain-timeout` seconds; `202 {"draining":true,"listeners":…,"drain_timeout_s":…}`. The
/// server exits when the drain is over. `401` without admin credentials, `405` for another
/// method.
pub async fn drain(
    State(ctx): State<Arc<ServerCtx>>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if !auth::is_admin(&ctx, auth::credentials(&headers).as_ref()) {
        return crate::admin::api::unauthorized();
    }
    if method != Method::POST {
        return crate::admin::api::method_not_allowed("POST");
    }
    let already = ctx.drain.is_draining();
    ctx.control.send(crate::control::Control::Drain);
    json(
        StatusCode::ACCEPTED,
        &serde_json::json!({
            "draining": true,
            "already_draining": already,
            "listeners": crate::roster::counts(&ctx).total(),
            "drain_timeout_s": ctx.config().limits.drain_timeout,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> ReadinessInput {
        ReadinessInput {
            draining: false,
            members: 10,
            capacity: 100,
            clients_full: false,
            relays_not_live: Vec::new(),
            ledger: None,
        }
    }

    fn keys(r: &Readiness) -> Vec<&'static str> {
        r.reasons.iter().map(|r| r.key).collect::<Vec<_>>()
    }

    #[test]
    fn below_capacity_and_live_is_ready() {
        let r = readiness(&input());
        assert!(r.ready);
        assert!(r.reasons.is_empty());
        assert_eq!((r.listeners, r.capacity), (10, 100));
    }

    #[test]
    fn at_capacity_is_not_ready_and_below_it_ready_again() {
        let mut i = input();
        i.members = 100;
        assert_eq!(keys(&readiness(&i)), ["full"]);
        i.members = 99;
        assert!(readiness(&i).ready);
        i.clients_full = true;
        assert_eq!(keys(&readiness(&i)), ["full"]);
    }

    #[test]
    fn every_reason_is_given_in_order() {
        let mut i = input();
        i.draining = true;
        i.members = 200;
        i.relays_not_live = vec!["/a.mp3".into(), "/b.ogg".into()];
        let r = readiness(&i);
        assert!(!r.ready);
        assert_eq!(
            keys(&r),
            ["draining", "full", "relay-not-live", "relay-not-live"]
        );
        assert!(r.reasons[3].detail.contains("/b.ogg"));
    }

    #[test]
    fn a_ledger_that_does_not_write_warns_without_making_the_server_not_ready() {
        let mut i = input();
        i.ledger = Some(LedgerState {
            writing: false,
            pending_sessions: 42,
            seconds_since_commit: Some(20.0),
        });
        let r = readiness(&i);
        assert!(r.ready);
        assert_eq!(r.warnings[0].key, "ledger-not-writing");
        assert!(r.warnings[0].detail.contains("42"));
    }
}
