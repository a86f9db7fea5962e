//! Tests own their memcached processes, so they can kill and restart them.

use crate::common;

#[test]
fn a_started_memcached_can_be_killed_and_restarted_on_its_port() {
    let mut server = common::memcached::Memcached::start();
    let address = server.address();
    server.kill();
    assert!(std::net::TcpStream::connect(&address).is_err());
    server.restart();
    assert_eq!(server.address(), address);
    assert!(std::net::TcpStream::connect(&address).is_ok());
}
