//! [`Bounded`]: the one in-memory cache type. A concurrent map holding at most a total weight
//! (a count of entries, or bytes, or rows, as its owner weighs them) that evicts on insert the
//! entries least likely to be asked for again (quick_cache's CLOCK-Pro), a few at a time: no
//! entry outlives the bound, and no insert drops everything at once. An entry heavier than the
//! bound over the shard count is not kept. Every cache of the process is one of these, owned by
//! the database's handle (`db::Db`), each named in docs/ARCHITECTURE.md with its bound and rule.

use std::hash::Hash;

/// How an entry weighs.
pub struct Weigh<K, V>(fn(&K, &V) -> u64);

impl<K, V> Clone for Weigh<K, V> {
    fn clone(&self) -> Self {
        Weigh(self.0)
    }
}

impl<K, V> quick_cache::Weighter<K, V> for Weigh<K, V> {
    fn weight(&self, key: &K, val: &V) -> u64 {
        (self.0)(key, val)
    }
}

/// A bounded concurrent map (see the module).
pub struct Bounded<K, V> {
    map: quick_cache::sync::Cache<K, V, Weigh<K, V>>,
}

impl<K: Eq + Hash, V: Clone> Bounded<K, V> {
    /// At most `n` entries.
    pub fn entries(n: usize) -> Self {
        Self::weighed(n as u64, n, None, |_, _| 1)
    }

    /// At most `max` in all of what `weigh` gives each entry, for about `items` entries. With
    /// `shards`, the map is split in that many locks (fewer when `items` gives any under 32) and
    /// one entry weighs at most `max / shards` (default: a few per core, for light entries).
    pub fn weighed(max: u64, items: usize, shards: Option<usize>, weigh: fn(&K, &V) -> u64) -> Self {
        let mut opts = quick_cache::OptionsBuilder::new();
        opts.estimated_items_capacity(items).weight_capacity(max);
        if let Some(s) = shards {
            opts.shards(s);
        }
        let opts = opts.build().expect("a bound and a count of items");
        let map = quick_cache::sync::Cache::with_options(opts, Weigh(weigh), Default::default(), Default::default());
        Bounded { map }
    }

    /// The entry of `key`, if kept.
    pub fn get<Q: Hash + quick_cache::Equivalent<K> + ?Sized>(&self, key: &Q) -> Option<V> {
        self.map.get(key)
    }

    /// Keep `val` for `key` (evicting others when the bound is passed).
    pub fn insert(&self, key: K, val: V) {
        self.map.insert(key, val)
    }

    /// Drop every entry.
    pub fn clear(&self) {
        self.map.clear()
    }

    /// Entries kept now.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The total weight kept now.
    pub fn weight(&self) -> u64 {
        self.map.weight()
    }
}

impl<K: Eq + Hash, V: Clone> std::fmt::Debug for Bounded<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bounded({} entries, weight {} of {})", self.map.len(), self.map.weight(), self.map.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::Bounded;

    /// The bound holds whatever is inserted, by entries and by weight, and an entry heavier than
    /// a shard's share is not kept.
    #[test]
    fn holds_its_bound() {
        let m = Bounded::entries(100);
        for i in 0..10_000 {
            m.insert(i, i);
        }
        assert!(m.len() <= 100 && m.len() >= 50, "{m:?}");
        assert_eq!(m.get(&9_999), Some(9_999), "the latest is kept");

        let b: Bounded<u32, String> = Bounded::weighed(1_000, 128, Some(4), |_, v| v.len() as u64);
        for i in 0..100 {
            b.insert(i, "x".repeat(100));
        }
        assert!(b.weight() <= 1_000, "{b:?}");
        b.insert(1_000, "y".repeat(300));
        assert_eq!(b.get(&1_000), None, "over a quarter of the bound: not kept");
        b.clear();
        assert!(b.is_empty());
    }
}
