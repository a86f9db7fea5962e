//! The kit never lets a memcached test skip: without the binary, the test
//! fails and says how to install it.

use memcache_ratelimit_testkit::Memcached;

#[test]
fn a_missing_memcached_fails_with_install_instructions() {
    // This binary holds only this test, so the variable is seen by no other.
    std::env::set_var("MEMCACHED_BIN", "/nonexistent/memcached");
    let outcome = std::panic::catch_unwind(Memcached::start);
    std::env::remove_var("MEMCACHED_BIN");
    let panic = outcome.expect_err("starting without a binary must fail");
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        message.contains("apt-get install -y memcached"),
        "{message}"
    );
}
