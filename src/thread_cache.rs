//! The size every decision's boxed futures are held to.
//!
//! glibc's allocator keeps freed blocks of up to 1,032 bytes in a cache
//! per thread (`tcache`; D. J. Delorie and others, *The GNU C Library
//! malloc*, <https://sourceware.org/glibc/wiki/MallocInternals>), where
//! allocating and freeing one costs a few dozen instructions. A larger
//! block takes the allocator's bins both ways, some hundreds of
//! instructions more (callgrind). A future that every decision boxes is
//! kept within the cache, and a test holds it there.

/// The largest block the per-thread cache keeps, in bytes.
pub(crate) const THREAD_CACHED: usize = 1032;
