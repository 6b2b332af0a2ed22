//! A small activation memory pool: freed buffers go to per-size-class free lists and are handed
//! out again instead of calling cuMemAlloc/cuMemFree on every forward pass.

use std::collections::HashMap;

use crate::buffer::{DeviceBuffer, Storage};
use crate::dtype::DeviceElem;
use crate::error::Result;
use crate::stream::Stream;

/// Smallest size class, in bytes.
const MIN_CLASS: usize = 256;
/// Size classes per power of two; four bounds the waste at 25%.
const STEPS_PER_DOUBLING: usize = 4;

/// The size class `bytes` is rounded up to: `MIN_CLASS`, or a multiple of a quarter of the
/// power of two just below `bytes`.
pub fn size_class(bytes: usize) -> usize {
    if bytes <= MIN_CLASS {
        return MIN_CLASS;
    }
    let floor_pow2 = 1usize << (usize::BITS - 1 - bytes.leading_zeros());
    let step = floor_pow2 / STEPS_PER_DOUBLING;
    bytes.div_ceil(step) * step
}

/// Free lists of blocks keyed by size class; generic over the block so the logic is testable
/// without a GPU.
#[derive(Debug)]
pub struct SizeClassPool<B> {
    free: HashMap<usize, Vec<B>>,
    cached_bytes: usize,
}

impl<B> Default for SizeClassPool<B> {
    fn default() -> Self {
        SizeClassPool {
            free: HashMap::new(),
            cached_bytes: 0,
        }
    }
}

impl<B> SizeClassPool<B> {
    /// A cached block for `bytes`, with the class size a new block should have if none is.
    pub fn take(&mut self, bytes: usize) -> (usize, Option<B>) {
        let class = size_class(bytes);
        let block = self.free.get_mut(&class).and_then(Vec::pop);
        if block.is_some() {
            self.cached_bytes -= class;
        }
        (class, block)
    }

    /// Caches a block of `capacity` bytes; a block whose capacity is not a size class could
    /// never be handed out again, so it is returned to the caller to free.
    pub fn put(&mut self, capacity: usize, block: B) -> Option<B> {
        if size_class(capacity) != capacity {
            return Some(block);
        }
        self.free.entry(capacity).or_default().push(block);
        self.cached_bytes += capacity;
        None
    }

    /// Bytes held in free lists.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// Drops every cached block.
    pub fn clear(&mut self) {
        self.free.clear();
        self.cached_bytes = 0;
    }
}

/// Device buffers recycled through a [`SizeClassPool`], allocated on one stream.
#[derive(Debug)]
pub struct ActivationPool {
    stream: Stream,
    pool: SizeClassPool<Storage>,
}

impl ActivationPool {
    pub fn new(stream: Stream) -> Self {
        ActivationPool {
            stream,
            pool: SizeClassPool::default(),
        }
    }

    /// A buffer of `len` elements with unspecified contents.
    pub fn alloc<T: DeviceElem>(&mut self, len: usize) -> Result<DeviceBuffer<T>> {
        let raw = match self.pool.take(len * size_of::<T>()) {
            (_, Some(raw)) => raw,
            (class, None) => self.stream.alloc_bytes(class)?,
        };
        Ok(DeviceBuffer::from_raw(raw, len))
    }

    /// Returns a buffer to the pool. Stream order makes reuse safe: later work on the pool's
    /// stream runs after the work that used the buffer.
    pub fn release<T: DeviceElem>(&mut self, buf: DeviceBuffer<T>) {
        let raw = buf.into_raw();
        // A foreign-sized buffer comes back and is freed here.
        drop(self.pool.put(raw.size_bytes(), raw));
    }

    pub fn cached_bytes(&self) -> usize {
        self.pool.cached_bytes()
    }

    /// Frees every cached buffer.
    pub fn trim(&mut self) {
        self.pool.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(0), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 320);
        assert_eq!(size_class(1000), 1024);
        assert_eq!(size_class(1025), 1280);
        assert_eq!(size_class(3 << 20), 3 << 20);
        for bytes in (1..100_000).step_by(37) {
            let class = size_class(bytes);
            assert!(class >= bytes);
            assert_eq!(size_class(class), class, "a class is its own class");
            assert!(
                class <= MIN_CLASS.max(bytes + bytes / 4),
                "{bytes} -> {class}"
            );
        }
    }

    #[test]
    fn freed_blocks_are_reused_by_class() {
        let mut pool = SizeClassPool::default();
        let (class, block) = pool.take(1000);
        assert_eq!((class, block), (1024, None));
        assert_eq!(pool.put(class, "a"), None);
        assert_eq!(pool.cached_bytes(), 1024);

        // Another request in the same class gets the cached block; other classes do not.
        assert_eq!(pool.take(2000), (2048, None));
        assert_eq!(pool.take(900), (1024, Some("a")));
        assert_eq!(pool.cached_bytes(), 0);
        assert_eq!(pool.take(900), (1024, None));
    }

    #[test]
    fn off_class_blocks_are_handed_back() {
        let mut pool = SizeClassPool::default();
        assert_eq!(pool.put(1000, "odd"), Some("odd"));
        assert_eq!(pool.cached_bytes(), 0);
        assert_eq!(pool.put(1024, "x"), None);
        assert_eq!(pool.put(1024, "y"), None);
        assert_eq!(pool.cached_bytes(), 2048);
        pool.clear();
        assert_eq!(pool.cached_bytes(), 0);
        assert_eq!(pool.take(1024), (1024, None));
    }
}
