//! [`PeakMemory`]: how builders measure the peak of their working memory for
//! `AccelStats::peak_build_bytes`, without a global allocator hook.
//!
//! A builder reports each large buffer (anything proportional to the number
//! of primitives or nodes: primitive references, sorted orders, scratch,
//! subtree fragments, the output arrays) to the counter when it allocates it
//! and when it frees it; the counter keeps the running total and its peak.
//! Buffers of a fixed size on the stack (bins, small-node arrays) and the
//! allocator's own overhead are not counted, so the figure is a slight
//! underestimate of what the process really used. Counting is atomic, so
//! parallel subtrees report concurrently; a builder calls it a few times per
//! subtree, never per primitive.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Running total and peak of the bytes a build holds.
#[derive(Debug, Default)]
pub struct PeakMemory {
    current: AtomicUsize,
    peak: AtomicUsize,
}

impl PeakMemory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an allocation of `bytes`.
    pub fn alloc(&self, bytes: usize) {
        let now = self.current.fetch_add(bytes, Relaxed) + bytes;
        self.peak.fetch_max(now, Relaxed);
    }

    /// Records that `bytes` were freed.
    pub fn free(&self, bytes: usize) {
        self.current.fetch_sub(bytes, Relaxed);
    }

    /// Records a buffer of `len` values of `T`.
    pub fn alloc_array<T>(&self, len: usize) {
        self.alloc(len * std::mem::size_of::<T>());
    }

    /// Records that a buffer of `len` values of `T` was freed.
    pub fn free_array<T>(&self, len: usize) {
        self.free(len * std::mem::size_of::<T>());
    }

    /// The most bytes held at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_peak_across_frees() {
        let memory = PeakMemory::new();
        memory.alloc_array::<u32>(10);
        memory.alloc(60);
        memory.free(60);
        memory.alloc(20);
        memory.free_array::<u32>(10);
        assert_eq!(memory.peak(), 100);
    }
}
