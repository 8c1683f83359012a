//! `GET /api/v1/reports/<name>` (admin credentials): the audience ledger's reports over HTTP
//! (`listening`, `tracks`, `plays` as JSON; `listening.csv`, `tracks.csv`, `sessions.csv`,
//! `soundexchange.csv`, `ppl.csv`), with `from`/`to` (Unix seconds or RFC 3339), `mount`,
//! `group`, and for SoundExchange `service`/`category`. The request is parsed by
//! `ledger/request.rs` and answered there, on a blocking thread with its own database
//! connection, so a long report never holds up the server's tasks. Statuses: 400 with the
//! parameter that is wrong, 401 without admin credentials, 404 for an unknown report or when
//! the server keeps no ledger, 500 when the database fails (logged).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::admin::api::{json_reply, unauthorized};
use crate::admin::auth;
use crate::config::Config;
use crate::ctx::ServerCtx;
use crate::ledger::db::{Db, DbError};
use crate::ledger::request::{ReportBody, ReportRequest};

/// `GET /api/v1/reports/{name}`.
pub async fn report(
    State(ctx): State<Arc<ServerCtx>>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if !auth::is_admin(&ctx, auth::credentials(&headers).as_ref()) {
        return unauthorized();
    }
    let config = ctx.config();
    let defaults = crate::ledger::request::ReportDefaults::of(&config);
    let req = match ReportRequest::parse(&name, &q, crate::ledger::now_ms(), &defaults) {
        Ok(r) => r,
        Err(why) if crate::ledger::request::ReportKind::parse(&name).is_none() => {
            return json_reply(StatusCode::NOT_FOUND, json!({ "error": why }));
        }
        Err(why) => return json_reply(StatusCode::BAD_REQUEST, json!({ "error": why })),
    };
    if ctx.ledger.is_none() {
        return json_reply(
            StatusCode::NOT_FOUND,
            json!({ "error": "this server keeps no audience ledger ([ledger] database)" }),
        );
    }
    let answered = on_ledger(config, move |db| {
        crate::ledger::request::run(db, &req, crate::ledger::now_ms())
    })
    .await;
    let failure = match answered {
        Ok(body) => return reply(&name, body),
        Err(e) => e,
    };
    tracing::error!(report = %name, "report failed: {failure}");
    json_reply(
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({ "error": "the report failed; see the server log" }),
    )
}

/// Runs `f` on a blocking thread (`tokio::task::spawn_blocking`) with a connection of its own
/// to the ledger database of `config`, so a long report never holds up the server's tasks; the
/// API and the reports page (`reports_page.rs`) ask for reports through it.
///
/// Errors: the database's, or the thread's panic, as text (for the server log).
pub async fn on_ledger<T: Send + 'static>(
    config: Arc<Config>,
    f: impl FnOnce(&mut Db) -> Result<T, DbError> + Send + 'static,
) -> Result<T, String> {
    let answered = tokio::task::spawn_blocking(move || -> Result<T, String> {
        let mut db = crate::ledger::open_for_reports(&config).map_err(|e| e.to_string())?;
        f(&mut db).map_err(|e| e.to_string())
    })
    .await;
    answered.unwrap_or_else(|e| Err(e.to_string()))
}

/// The HTTP form of an answered report: CSV files are offered as downloads named after the
/// report.
fn reply(name: &str, body: ReportBody) -> Response {
    let mut r = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, body.content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body.body,
    )
        .into_response();
    if body.content_type.starts_with("text/csv") {
        let file = if name.ends_with(".csv") {
            name.to_owned()
        } else {
            format!("{name}.csv")
        };
        if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
            r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
        }
    }
    if body.truncated {
        r.headers_mut()
            .insert("x-throng-truncated", HeaderValue::from_static("1"));
    }
    r
}
