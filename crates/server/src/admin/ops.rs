//! What the admin commands do to the running server, shared by the Icecast-style `/admin/*`
//! commands and the JSON API, with Icecast 2.4.4's checks and messages (`admin.c`):
//! finding the mount a command applies to, `killclient`, `killsource`, `moveclients`,
//! `fallbacks` and `metadata`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use thiserror::Error;

use crate::audience::follow::MoveFilter;
use crate::audience::page::Page;
use crate::audience::ListenerRow;
use crate::ctx::ServerCtx;
use crate::ledger::TitleSetter;
use crate::mount::live::Mount;

/// Why an admin command on a mount failed. The messages are Icecast 2.4.4's; all are answered
/// with status 400 by `/admin/*`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AdminError {
    /// No mount of that name is live (`admin_handle_request`).
    #[error("Source does not exist")]
    SourceDoesNotExist,
    /// The mount is registered but its source has ended (`admin_handle_request`).
    #[error("Source is not available")]
    SourceNotAvailable,
    /// A required parameter is absent (`COMMAND_REQUIRE`), e.g. `id` of `killclient`.
    #[error("Missing parameter")]
    MissingParameter,
    /// The `mount` (or `destination`, `fallback`) parameter is not a canonical mount name
    /// ([`throng_proto::mount_name::check`]); it is never looked up.
    #[error("Invalid mountpoint")]
    InvalidMountName,
    /// `moveclients`: the destination is not live and falls back to no live mount.
    #[error("No such destination")]
    NoSuchDestination,
    /// `moveclients`: the destination (after fallbacks) is the mount itself.
    #[error("supplied mountpoints are identical")]
    IdenticalMounts,
    /// `moveclients`: the two mounts carry different formats, so players could not decode the
    /// destination (Icecast 2.4.4 `source_move_clients` then silently moves nobody).
    #[error("Clients not moved: {from} and {to} carry different stream formats")]
    FormatMismatch {
        /// The mount listeners would leave.
        from: String,
        /// The destination.
        to: String,
    },
}

/// Checks that a mount name given as a parameter is canonical, before any lookup.
///
/// Errors: [`AdminError::InvalidMountName`] when it is not.
pub fn check_name(name: &str) -> Result<(), AdminError> {
    throng_proto::mount_name::check(name).map_err(|_| AdminError::InvalidMountName)
}

/// The live mount `name` an admin command applies to.
///
/// Errors: [`AdminError::InvalidMountName`] when `name` is not canonical,
/// [`AdminError::SourceDoesNotExist`] when no such mount is registered,
/// [`AdminError::SourceNotAvailable`] when its feed has ended.
pub fn live_mount(ctx: &ServerCtx, name: &str) -> Result<Arc<Mount>, AdminError> {
    check_name(name)?;
    let m = ctx
        .registry
        .get(name)
        .ok_or(AdminError::SourceDoesNotExist)?;
    if m.queue.load().ended {
        return Err(AdminError::SourceNotAvailable);
    }
    Ok(m)
}

/// The listeners on `mount` now, on every path (ICY, HLS, WHEP), on `page`, sorted by id
/// (`listclients`, the API's listeners, the admin UI's mount page).
pub async fn listeners(ctx: &ServerCtx, mount: &Mount, page: Page) -> Vec<ListenerRow> {
    crate::roster::members(ctx, Some(&mount.name), page).await
}

/// Parses an id as C `atoi` does (leading blanks, optional sign, digits; anything else ends
/// it; nothing is 0), so `killclient?id=` reports the id Icecast 2.4.4 would.
pub fn atoi(text: &str) -> i64 {
    let t = text.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut n: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        n = n.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg {
        -n
    } else {
        n
    }
}

/// Disconnects listener `id` if it is on `mount`; whether it was (`killclient`).
pub async fn kill_client(ctx: &ServerCtx, mount: &Mount, id: i64) -> bool {
    let Ok(id) = u64::try_from(id) else {
        return false;
    };
    let on_mount = listeners(ctx, mount, Page::only(id))
        .await
        .iter()
        .any(|r| r.id == id);
    let killed = on_mount && crate::roster::kill(ctx, id).await;
    if killed {
        tracing::info!(mount = %mount.name, id, "admin: client removed");
    }
    killed
}

/// Asks the feeder of `mount` to stop (`killsource`); its listeners then move to its fallback,
/// or are closed, as when a source leaves.
pub fn kill_source(mount: &Mount) {
    tracing::info!(mount = %mount.name, "admin: source removed");
    mount.stop.store(true, Ordering::Relaxed);
}

/// Moves every listener of `from`, on every path (ICY, HLS, WHEP), to the mount serving
/// `destination` (itself if live, else
/// its first live fallback, as `source_find_mount`), each at its next frame boundary
/// (`moveclients`). Returns that mount and how many listeners were moved.
///
/// Errors: [`AdminError::InvalidMountName`], [`AdminError::NoSuchDestination`],
/// [`AdminError::IdenticalMounts`], [`AdminError::FormatMismatch`].
pub async fn move_clients(
    ctx: &ServerCtx,
    from: &Mount,
    destination: &str,
) -> Result<(Arc<Mount>, usize), AdminError> {
    check_name(destination)?;
    let to = ctx
        .registry
        .resolve(destination)
        .ok_or(AdminError::NoSuchDestination)?;
    if to.name == from.name {
        return Err(AdminError::IdenticalMounts);
    }
    if to.settings.format != from.settings.format {
        return Err(AdminError::FormatMismatch {
            from: from.name.clone(),
            to: to.name.clone(),
        });
    }
    let moved = crate::roster::move_members(
        ctx,
        MoveFilter {
            from: Some(from.name.clone()),
            requested: None,
        },
        to.clone(),
    )
    .await;
    tracing::info!(
        from = %from.name, to = %to.name, icy = moved.icy, hls = moved.hls, whep = moved.whep,
        "admin: clients moved"
    );
    Ok((to, moved.total()))
}

/// Sets the fallback of `mount` to `fallback` (`""` clears it) for as long as the server runs
/// (`fallbacks`).
pub fn set_fallback(ctx: &ServerCtx, mount: &Mount, fallback: &str) {
    ctx.registry.set_fallback(&mount.name, fallback);
    tracing::info!(mount = %mount.name, %fallback, "admin: fallback configured");
}

/// A metadata update (`metadata?mode=updinfo`), already decoded from its charset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataUpdate {
    /// `song`: the whole title.
    pub song: Option<String>,
    /// `artist`, joined as `artist - title`.
    pub artist: Option<String>,
    /// `title`.
    pub title: Option<String>,
    /// `url`: sent as `StreamUrl`.
    pub url: Option<String>,
}

/// What a metadata update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataOutcome {
    /// The title changed.
    Updated,
    /// No title was given; nothing changed (Icecast 2.4.4 still answers success).
    Unchanged,
    /// The mount's format carries no ICY metadata (Ogg, EBML): Icecast 2.4.4 answers
    /// "Mountpoint will not accept URL updates".
    NotAccepted,
}

/// Applies `u` to `mount`: `song` wins, else `artist - title` (or either alone). On Ogg
/// Vorbis and Opus mounts the tags go into a new chained stream (`mount/ogg_retag.rs`); other Ogg
/// codecs and EBML are [`MetadataOutcome::NotAccepted`], as Icecast 2.4.4 refuses them.
pub fn update_metadata(mount: &Mount, u: &MetadataUpdate) -> MetadataOutcome {
    if mount.settings.format == throng_proto::format::Format::Ogg {
        let Some((artist, title)) = crate::mount::ogg_retag::tags_from_query(
            u.song.as_deref(),
            u.artist.as_deref(),
            u.title.as_deref(),
        ) else {
            return MetadataOutcome::Unchanged;
        };
        return match crate::mount::ogg_retag::request_ogg_tags(mount, artist, title) {
            Ok(()) => {
                tracing::info!(mount = %mount.name, %title, ?artist, "Ogg metadata updated");
                MetadataOutcome::Updated
            }
            Err(e) => {
                tracing::info!(mount = %mount.name, "Ogg metadata update refused: {e}");
                MetadataOutcome::NotAccepted
            }
        };
    }
    if !mount.settings.format.supports_icy_metadata() {
        return MetadataOutcome::NotAccepted;
    }
    let title = match (&u.song, &u.artist, &u.title) {
        (Some(song), _, _) => song.clone(),
        (None, Some(a), Some(t)) => format!("{a} - {t}"),
        (None, None, Some(t)) => t.clone(),
        (None, Some(a), None) => a.clone(),
        (None, None, None) => return MetadataOutcome::Unchanged,
    };
    mount.set_title(&title, u.url.as_deref(), TitleSetter::Admin);
    tracing::info!(mount = %mount.name, %title, "metadata updated");
    MetadataOutcome::Updated
}

#[cfg(test)]
mod tests {
    use super::atoi;

    #[test]
    fn ids_parse_as_atoi() {
        assert_eq!(atoi("42"), 42);
        assert_eq!(atoi(" 7x"), 7);
        assert_eq!(atoi("abc"), 0);
        assert_eq!(atoi(""), 0);
        assert_eq!(atoi("-3"), -3);
        assert_eq!(atoi("99999999999999999999999"), i64::MAX);
    }
}
