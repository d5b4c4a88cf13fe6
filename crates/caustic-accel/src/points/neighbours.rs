//! The neighbour record and the two bounded collections the kNN searches
//! keep their current best `k` in:
//!
//! - [`SortedList`]: a sorted array with insertion from the back, the
//!   "bounded sorted list" of Fleisz (2009) and the modified insertion sort
//!   of Garcia et al. (2008); cheap for small `k` and for candidates that
//!   mostly arrive in increasing distance (the hash grid visits the centre
//!   cell first);
//! - [`MaxHeap`]: a binary max-heap, `O(log k)` per insertion whatever the
//!   arrival order (the kd-tree's priority-queue search).
//!
//! Both live inside the caller's `Vec<Neighbour>`, so a query allocates
//! nothing once the vector has grown to `k`. Both order candidates by
//! [`Neighbour::key`], the `(dist2, index)` tie rule of the module contract.

use bytemuck::{Pod, Zeroable};

/// One result of a query: the point's input index and its squared distance
/// to the query.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Neighbour {
    pub index: u32,
    pub dist2: f32,
}

const _: () = assert!(std::mem::size_of::<Neighbour>() == 8);

impl Neighbour {
    #[inline(always)]
    pub fn new(index: u32, dist2: f32) -> Self {
        Self { index, dist2 }
    }

    /// The `(dist2, index)` order as one integer. Squared distances are
    /// never negative (nor -0.0: they are sums of squares), and the bits of
    /// non-negative floats order like the floats, so comparing keys compares
    /// distances first and breaks ties by index.
    #[inline(always)]
    pub fn key(&self) -> u64 {
        (u64::from(self.dist2.to_bits()) << 32) | u64::from(self.index)
    }
}

/// The `k` best candidates so far, kept sorted in `items`.
pub(crate) struct SortedList<'a> {
    items: &'a mut Vec<Neighbour>,
    k: usize,
}

impl<'a> SortedList<'a> {
    /// An empty list of capacity `k >= 1` in `items`.
    pub fn new(items: &'a mut Vec<Neighbour>, k: usize) -> Self {
        debug_assert!(k >= 1, "a kNN list holds at least one entry");
        items.clear();
        items.reserve(k);
        Self { items, k }
    }

    /// Squared distance a candidate must not exceed to enter: the radius
    /// bound until the list is full, then its last entry's distance.
    #[inline(always)]
    pub fn bound(&self, radius2: f32) -> f32 {
        if self.items.len() < self.k {
            radius2
        } else {
            self.items[self.k - 1].dist2
        }
    }

    /// Inserts `n` if it is better than the worst kept entry, shifting the
    /// worse ones back by one (insertion sort from the back).
    #[inline]
    pub fn offer(&mut self, n: Neighbour) {
        let key = n.key();
        let len = self.items.len();
        if len == self.k {
            if key >= self.items[len - 1].key() {
                return;
            }
            self.items.pop();
        }
        let mut at = self.items.len();
        while at > 0 && self.items[at - 1].key() > key {
            at -= 1;
        }
        self.items.insert(at, n);
    }
}

/// The `k` best candidates so far as a binary max-heap on [`Neighbour::key`]
/// in `items`; [`MaxHeap::finish`] sorts them.
pub(crate) struct MaxHeap<'a> {
    items: &'a mut Vec<Neighbour>,
    k: usize,
}

impl<'a> MaxHeap<'a> {
    /// An empty heap of capacity `k >= 1` in `items`.
    pub fn new(items: &'a mut Vec<Neighbour>, k: usize) -> Self {
        debug_assert!(k >= 1, "a kNN heap holds at least one entry");
        items.clear();
        items.reserve(k);
        Self { items, k }
    }

    /// As [`SortedList::bound`]: the radius until full, then the worst kept.
    #[inline(always)]
    pub fn bound(&self, radius2: f32) -> f32 {
        if self.items.len() < self.k {
            radius2
        } else {
            self.items[0].dist2
        }
    }

    #[inline]
    pub fn offer(&mut self, n: Neighbour) {
        if self.items.len() < self.k {
            self.items.push(n);
            self.sift_up(self.items.len() - 1);
        } else if n.key() < self.items[0].key() {
            self.items[0] = n;
            self.sift_down(0);
        }
    }

    /// Leaves the kept candidates sorted by key in the caller's vector.
    pub fn finish(self) {
        self.items.sort_unstable_by_key(Neighbour::key);
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.items[parent].key() >= self.items[i].key() {
                break;
            }
            self.items.swap(parent, i);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let len = self.items.len();
        loop {
            let left = 2 * i + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.items[right].key() > self.items[left].key() {
                right
            } else {
                left
            };
            if self.items[i].key() >= self.items[child].key() {
                break;
            }
            self.items.swap(i, child);
            i = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates() -> Vec<Neighbour> {
        // Distances with ties, in a scrambled order.
        [
            (7, 2.0),
            (3, 1.0),
            (9, 1.0),
            (1, 4.0),
            (0, 0.0),
            (5, 2.0),
            (2, 1.0),
        ]
        .into_iter()
        .map(|(i, d)| Neighbour::new(i, d))
        .collect()
    }

    fn expected(k: usize) -> Vec<Neighbour> {
        let mut all = candidates();
        all.sort_by_key(Neighbour::key);
        all.truncate(k);
        all
    }

    #[test]
    fn key_orders_by_distance_then_index() {
        assert!(Neighbour::new(9, 1.0).key() < Neighbour::new(0, 2.0).key());
        assert!(Neighbour::new(2, 1.0).key() < Neighbour::new(3, 1.0).key());
        assert!(Neighbour::new(0, 0.0).key() < Neighbour::new(0, f32::MIN_POSITIVE).key());
        assert!(Neighbour::new(0, f32::MAX).key() < Neighbour::new(0, f32::INFINITY).key());
    }

    #[test]
    fn sorted_list_and_heap_keep_the_k_best() {
        for k in 1..=8 {
            let mut list_items = Vec::new();
            let mut list = SortedList::new(&mut list_items, k);
            for n in candidates() {
                list.offer(n);
            }
            assert_eq!(list_items, expected(k), "list, k = {k}");
            let mut heap_items = Vec::new();
            let mut heap = MaxHeap::new(&mut heap_items, k);
            for n in candidates() {
                heap.offer(n);
            }
            heap.finish();
            assert_eq!(heap_items, expected(k), "heap, k = {k}");
        }
    }
}
