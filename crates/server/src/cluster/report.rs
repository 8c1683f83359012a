//! The edge's side: with `[cluster] origin` set, report to the origin every
//! `report-interval` seconds (`POST <origin>/api/v1/cluster/edges`, HTTP Basic user `edge` and
//! the cluster `secret`, a JSON [`EdgeReport`]): its public URL, capacity, listeners and live
//! mounts, and whether it drains (a drain starting sends a report at once). The keys are read again before each report, so a reload starts, stops or redirects
//! the reports. A failed report is logged (a warning when reports start failing, and when they
//! work again); the origin drops the edge once it misses `edge-timeout`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use throng_proto::url_auth::CallbackUrl;

use crate::auth::http_client;
use crate::cluster::registry::EdgeReport;
use crate::ctx::ServerCtx;

/// The report of this server now, for an origin: `None` unless `[cluster] origin` and
/// `public-url` are set.
pub fn current(ctx: &ServerCtx) -> Option<EdgeReport> {
    let config = ctx.config();
    let c = &config.cluster;
    c.origin.as_ref()?;
    let url = c.public_url.clone()?;
    let mut mounts = std::collections::BTreeMap::new();
    for m in ctx.registry.list() {
        if !m.queue.load().ended {
            mounts.insert(
                m.name.clone(),
                u64::from(m.listeners.load(Ordering::Relaxed)),
            );
        }
    }
    let capacity = if c.capacity > 0 {
        c.capacity
    } else {
        u64::try_from(ctx.clients.max()).unwrap_or(0)
    };
    Some(EdgeReport {
        url,
        capacity,
        listeners: mounts.values().sum(),
        mounts,
        time: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0),
        draining: ctx.drain.is_draining(),
    })
}

/// Sends one report; returns the origin's HTTP status.
///
/// Errors: a message saying why no reply came (bad origin URL, connection, timeout).
pub async fn send(ctx: &ServerCtx, report: &EdgeReport) -> Result<u16, String> {
    let config = ctx.config();
    let c = &config.cluster;
    let origin = c.origin.as_deref().ok_or("no origin")?;
    let url = format!("{}/api/v1/cluster/edges", origin.trim_end_matches('/'));
    let url = CallbackUrl::parse(&url).map_err(|e| e.to_string())?;
    let basic = ("edge".to_string(), c.secret.clone().unwrap_or_default());
    let body = serde_json::to_string(report).map_err(|e| e.to_string())?;
    // Signed with the secret; the report's `time` is inside (`sign.rs`).
    let signature =
        crate::cluster::sign::sign(c.secret.as_deref().unwrap_or_default(), body.as_bytes());
    let extra = [(crate::cluster::sign::SIGNATURE_HEADER, signature.as_str())];
    let timeout = Duration::from_secs(c.report_interval.clamp(1, 10));
    let agent = &config.server_id;
    http_client::post(
        &url,
        Some(&basic),
        agent,
        "application/json",
        &extra,
        body,
        timeout,
    )
    .await
    .map(|r| r.status)
    .map_err(|e| e.to_string())
}

/// Starts the reporting task; it ends when the server shuts down.
pub fn spawn(ctx: Arc<ServerCtx>) {
    tokio::spawn(async move {
        let mut shutdown = ctx.shutdown.clone();
        let mut failing = false;
        loop {
            let interval = Duration::from_secs(ctx.config().cluster.report_interval.max(1));
            if let Some(report) = current(&ctx) {
                let outcome = send(&ctx, &report).await;
                let origin = ctx.config().cluster.origin.clone().unwrap_or_default();
                match outcome {
                    Ok(200) => {
                        if failing {
                            tracing::warn!(%origin, "cluster reports to the origin work again");
                        }
                        failing = false;
                    }
                    Ok(status) => {
                        if !failing {
                            tracing::warn!(%origin, status, "the origin refused this edge's report");
                        }
                        failing = true;
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!(%origin, "cannot report to the origin: {e}");
                        }
                        failing = true;
                    }
                }
            }
            // A drain starting reports at once: the origin stops sending listeners here.
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = ctx.drain.started() => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                return;
            }
        }
    });
}
