//! The shard's listener moves and admin queries: scheduling moves for `moveclients` and
//! `fallback-override`, applying one when the listener sits on a chunk (frame or page)
//! boundary with nothing pending (while a move waits, the listener's writes end on the next
//! boundary: [`decide::move_write_cap`]), switching its cursor and counts to the new mount, and
//! listing listeners for `listclients`. Split from `shard.rs`, whose thread loop calls these.

use std::sync::Arc;

use crate::mount::live::Mount;

use std::time::Instant;

use super::{decide, ListenerRow, MoveFilter, Shard};
use crate::audience::follow::{self, JoinAt};
use crate::audience::page::{take_page, Page};

impl Shard {
    pub(super) fn schedule_moves(&mut self, filter: &MoveFilter, to: &Arc<Mount>) -> usize {
        let mut n = 0;
        for (key, slot) in self.slots.iter() {
            let on = &self.mounts[slot.mount]
                .as_ref()
                .expect("mount of a live slot")
                .mount;
            if !follow::may_move(on.id, on.settings.format, to.id, to.settings.format)
                || !filter.takes(&on.name, &slot.info.requested_mount)
            {
                continue;
            }
            self.moves.insert(key, to.clone());
            n += 1;
        }
        n
    }

    pub(super) fn rows(&self, mount: Option<&str>, page: Page) -> Vec<ListenerRow> {
        let now = Instant::now();
        let rows = self.slots.iter().filter_map(|(_, slot)| {
            let sm = self.mounts[slot.mount].as_ref()?;
            if slot.info.id <= page.after || mount.is_some_and(|m| m != sm.mount.name) {
                return None;
            }
            Some(slot.info.row(
                &sm.mount.name,
                now,
                sm.snapshot.head.saturating_sub(slot.cursor.pos),
                slot.sent,
            ))
        });
        take_page(rows, page)
    }

    /// Moves listener `key` to mount `to`: leaves its old mount's counts, joins `to` at its
    /// burst point. The caller checked that the listener is on a chunk boundary.
    pub(super) fn switch(&mut self, key: usize, to: Arc<Mount>) {
        let old = self.slots[key].mount;
        let sm = self.mounts[old].as_mut().expect("mount of a live slot");
        let from = sm.mount.clone();
        sm.listeners -= 1;
        if sm.listeners == 0 {
            sm.flush_bytes(&self.ctx.metrics);
            self.mounts[old] = None;
        }
        from.move_listener_to(&to, &self.ctx.metrics);
        let mi = self.mount_index(&to);
        let fallback = self.ctx.fallback.clone();
        let sm = self.mounts[mi].as_mut().expect("just inserted");
        sm.refresh(fallback.as_ref(), self.now);
        sm.listeners += 1;
        let j = follow::join(&sm.snapshot, JoinAt::Switch(to.burst_size()));
        let slot = &mut self.slots[key];
        slot.mount = mi;
        slot.cursor
            .switch_to(j.pos, j.headers.map(|h| (*h).clone()));
        tracing::debug!(from = %from.name, to = %to.name, id = slot.info.id, "listener moved");
    }

    /// Applies a pending move of listener `key` if it is on a chunk boundary and owes nothing
    /// from before the stream (response head, intro, header pages: the switch replaces them
    /// with the new mount's header pages); true if moved.
    pub(super) fn apply_move(&mut self, key: usize) -> bool {
        let slot = &self.slots[key];
        let sm = self.mounts[slot.mount]
            .as_ref()
            .expect("mount of a live slot");
        let chunk_start = sm
            .snapshot
            .chunk_index(slot.cursor.pos)
            .map(|i| sm.snapshot.chunks[i].start);
        if !decide::move_ready(chunk_start, slot.cursor.pos, slot.cursor.has_pending()) {
            return false;
        }
        let Some(to) = self.moves.remove(&key) else {
            return false;
        };
        if to.queue.load().ended {
            return false;
        }
        self.switch(key, to);
        true
    }

    /// The write cap of listener `key` while its move waits ([`decide::move_write_cap`]).
    pub(super) fn move_write_cap(&self, key: usize) -> Option<usize> {
        let slot = &self.slots[key];
        let sm = self.mounts[slot.mount].as_ref()?;
        let end = sm
            .snapshot
            .chunk_index(slot.cursor.pos)
            .map(|i| sm.snapshot.chunks[i].end());
        decide::move_write_cap(slot.cursor.pending_len(), end, slot.cursor.pos)
    }
}
