//! Master/slave relaying (`[master]`), as Icecast 2.4.4 `slave.c:update_from_master`: every
//! `update-interval` seconds (and once at start) the slave GETs `/admin/streamlist.txt` from the
//! master with Basic auth of the master's relay user, and relays each listed stream (a mount on
//! the master, or a full `http://` URL) to the same local mount name, with metadata on and
//! on-demand per `master.on-demand`. A relay whose line disappears is stopped; a failed poll
//! keeps the current relays.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use throng_proto::http::decode_text;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::MasterConfig;
use crate::ctx::ServerCtx;
use crate::ingest::relay::client::{parse_streamlist, streamlist_request, Upstream};
use crate::ingest::relay::pull::{
    connect, read_response_head, spawn as spawn_relay, RelayError, RelayHandle, RelaySpec,
    StopSignal,
};

/// Largest stream list accepted from a master, in bytes.
pub const MAX_STREAMLIST_BYTES: usize = 1 << 20;

/// How long the stream list's body may take to arrive after its head.
pub const STREAMLIST_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts the stream-list poller for `cfg`; `static_mounts` are local mounts of `[[relay]]`
/// sections, which listed streams of the same name do not replace. The returned handle stops
/// the poller and every relay it started.
pub fn spawn(ctx: Arc<ServerCtx>, cfg: MasterConfig, static_mounts: Vec<String>) -> RelayHandle {
    let (stop, cancel) = watch::channel(false);
    let signal = StopSignal::new(&ctx, cancel);
    let task: JoinHandle<()> = tokio::spawn(run(ctx, cfg, static_mounts, signal));
    RelayHandle::from_parts(stop, task)
}

/// The master as an upstream address.
fn master_of(cfg: &MasterConfig) -> Upstream {
    Upstream {
        host: cfg.server.clone(),
        port: cfg.port,
        mount: "/admin/streamlist.txt".into(),
        tls: false,
    }
}

/// Fetches and parses the master's stream list.
///
/// Errors: connection, head and refusal errors as [`RelayError`]; a body over
/// [`MAX_STREAMLIST_BYTES`] or slower than [`STREAMLIST_TIMEOUT`].
pub async fn fetch_streamlist(
    ctx: &ServerCtx,
    cfg: &MasterConfig,
) -> Result<Vec<Upstream>, RelayError> {
    let master = master_of(cfg);
    let mut stream = connect(&master, None).await?;
    let req = streamlist_request(
        &master,
        &ctx.config().server_id,
        &cfg.username,
        &cfg.password,
    );
    stream.write_all(req.as_bytes()).await?;
    let (head, mut body) = read_response_head(&mut stream, ctx.config().header_timeout()).await?;
    if head.status != 200 {
        return Err(RelayError::Refused {
            upstream: master.to_string(),
            status: head.status,
            reason: head.reason,
        });
    }
    let length = head
        .header("content-length")
        .and_then(|v| v.trim().parse::<usize>().ok());
    let read = async {
        let mut chunk = [0u8; 8192];
        while length.is_none_or(|l| body.len() < l) {
            if body.len() > MAX_STREAMLIST_BYTES {
                return Err(RelayError::BodyTooLarge(MAX_STREAMLIST_BYTES));
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        Ok(())
    };
    tokio::time::timeout(STREAMLIST_TIMEOUT, read)
        .await
        .unwrap_or(Err(RelayError::BodyTimeout(STREAMLIST_TIMEOUT.as_secs())))?;
    if let Some(l) = length {
        body.truncate(l);
    }
    Ok(parse_streamlist(&decode_text(&body), &master))
}

/// The relays a stream list asks for (metadata on, on-demand per `cfg`), leaving out mounts fed
/// by `[[relay]]` sections.
pub fn wanted_relays(
    list: Vec<Upstream>,
    cfg: &MasterConfig,
    static_mounts: &[String],
) -> Vec<RelaySpec> {
    list.into_iter()
        .filter(|u| !static_mounts.contains(&u.mount))
        .map(|u| RelaySpec {
            local_mount: u.mount.clone(),
            upstream: u,
            credentials: None,
            metadata: true,
            on_demand: cfg.on_demand,
        })
        .collect()
}

async fn run(
    ctx: Arc<ServerCtx>,
    cfg: MasterConfig,
    static_mounts: Vec<String>,
    mut stop: StopSignal,
) {
    let interval = Duration::from_secs(cfg.update_interval.max(1));
    let mut running: HashMap<String, (RelaySpec, RelayHandle)> = HashMap::new();
    let master = master_of(&cfg);
    loop {
        let fetched = tokio::select! {
            r = fetch_streamlist(&ctx, &cfg) => r,
            _ = stop.wait() => break,
        };
        match fetched {
            Ok(list) => {
                tracing::debug!(master = %master.authority(), streams = list.len(), "stream list");
                let wanted = wanted_relays(list, &cfg, &static_mounts);
                reconcile(&ctx, &mut running, wanted).await;
            }
            Err(e) => tracing::warn!(
                master = %master.authority(),
                by = ?e.by(),
                "cannot fetch the master's stream list: {e}; keeping {} relays",
                running.len()
            ),
        }
        if !stop.sleep(interval).await {
            break;
        }
    }
    for (_, (_, h)) in running {
        h.stop().await;
    }
}

/// Stops relays no longer wanted (or changed) and starts new ones.
async fn reconcile(
    ctx: &Arc<ServerCtx>,
    running: &mut HashMap<String, (RelaySpec, RelayHandle)>,
    wanted: Vec<RelaySpec>,
) {
    let gone: Vec<String> = running
        .iter()
        .filter(|(name, (spec, _))| !wanted.iter().any(|w| &w.local_mount == *name && w == spec))
        .map(|(name, _)| name.clone())
        .collect();
    for name in gone {
        if let Some((spec, h)) = running.remove(&name) {
            tracing::info!(mount = %name, upstream = %spec.upstream, "master no longer lists it: relay stopped");
            h.stop().await;
        }
    }
    for spec in wanted {
        if running.contains_key(&spec.local_mount) {
            continue;
        }
        tracing::info!(mount = %spec.local_mount, upstream = %spec.upstream, on_demand = spec.on_demand, "master lists it: relaying");
        let h = spawn_relay(ctx.clone(), spec.clone());
        running.insert(spec.local_mount.clone(), (spec, h));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_streams_become_metadata_relays_except_static_ones() {
        let cfg = MasterConfig {
            server: "m".into(),
            on_demand: true,
            ..MasterConfig::default()
        };
        let master = master_of(&cfg);
        let list = parse_streamlist("/a\r\n/b\r\nhttp://o:9/c\r\n", &master);
        let wanted = wanted_relays(list, &cfg, &["/b".to_owned()]);
        assert_eq!(wanted.len(), 2);
        assert_eq!(wanted[0].local_mount, "/a");
        assert_eq!(wanted[0].upstream.authority(), "m:8000");
        assert!(wanted[0].metadata && wanted[0].on_demand && wanted[0].credentials.is_none());
        assert_eq!(wanted[1].upstream.authority(), "o:9");
        assert_eq!(wanted[1].local_mount, "/c");
    }
}
