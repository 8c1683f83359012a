//! The writer's shared names: the few strings its in-memory keys repeat (mounts, paths,
//! countries, players) held once each as `Arc<str>`, so a key is built by cloning pointers
//! rather than allocating, and two keys compare by pointer first (`Arc`'s equality does).
//! Bounded: past [`MAX_NAMES`] distinct names (player names come from `User-Agent`s, which a
//! client chooses) the set starts over; names already handed out stay valid, only sharing
//! with later ones is lost.

use std::sync::Arc;

use foldhash::HashSet;

/// Most names held at once (4,096).
pub const MAX_NAMES: usize = 4_096;

/// A bounded set of shared names.
#[derive(Debug, Default)]
pub struct Names {
    set: HashSet<Arc<str>>,
}

impl Names {
    /// No names yet.
    pub fn new() -> Names {
        Names::default()
    }

    /// The shared copy of `name`, made on first use.
    pub fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.set.get(name) {
            return shared.clone();
        }
        if self.set.len() >= MAX_NAMES {
            self.set.clear();
        }
        let shared: Arc<str> = Arc::from(name);
        self.set.insert(shared.clone());
        shared
    }

    /// How many names are held.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no name is held.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_shared() {
        let mut n = Names::new();
        let a = n.get("/live");
        let b = n.get("/live");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(n.len(), 1);
        assert!(!Arc::ptr_eq(&a, &n.get("/other")));
    }

    #[test]
    fn the_set_starts_over_past_its_bound() {
        let mut n = Names::new();
        let first = n.get("first");
        for i in 0..MAX_NAMES {
            n.get(&format!("player-{i}"));
        }
        assert!(n.len() <= MAX_NAMES);
        // The old copy is still a valid name; the set made a new one.
        assert_eq!(&*first, "first");
        assert!(!Arc::ptr_eq(&first, &n.get("first")));
    }
}
