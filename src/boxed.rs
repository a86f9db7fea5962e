//! Futures boxed where they are built.
//!
//! `Box::pin(future)` builds the future first, in the caller's frame,
//! then allocates and copies all of it into the box: for a decision's
//! future of about a kilobyte, a call to `memcpy` of some 120
//! instructions (callgrind), that writes every byte of the box, the
//! unused states' bytes too. Allocating first and building the future
//! into the allocation lets the compiler write its first state's few
//! fields straight into the box, and nothing else.

use std::pin::Pin;

/// The future `build` returns, pinned in a box it was built in.
///
/// Inlined, so that the compiler sees the allocation before the future
/// is made; a caller's `Pin<Box<dyn Future>>` takes the result as it
/// would `Box::pin`'s.
#[inline(always)]
pub(crate) fn pinned<F>(build: impl FnOnce() -> F) -> Pin<Box<F>> {
    let room = Box::<F>::new_uninit();
    Box::into_pin(Box::write(room, build()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_future_built_in_its_box_runs_as_one_boxed_after() {
        let text = String::from("built in place");
        let boxed: Pin<Box<dyn std::future::Future<Output = usize> + Send>> =
            pinned(|| async move {
                tokio::task::yield_now().await;
                text.len()
            });
        assert_eq!(boxed.await, 14);
    }
}
