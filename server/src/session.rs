//! What the server knows of one connection.

use bytes::Bytes;

use crate::resp::Protocol;

/// One connection's state.
#[derive(Debug)]
pub struct Session {
    /// The protocol its replies use (`HELLO 3` switches to RESP3).
    pub protocol: Protocol,
    /// Whether it gave the password (always true when none is required).
    pub authenticated: bool,
    /// The name it set (`CLIENT SETNAME`, `HELLO ... SETNAME`).
    pub name: Option<Bytes>,
    /// Its number, unique in this process.
    pub id: i64,
}

impl Session {
    pub fn new(id: i64, password_required: bool) -> Self {
        Self {
            protocol: Protocol::Resp2,
            authenticated: !password_required,
            name: None,
            id,
        }
    }
}
