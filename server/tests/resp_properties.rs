//! Property tests of the RESP layer: the request parser on arbitrary bytes,
//! round trips of encoded requests fed in arbitrary pieces, and a cross-check
//! of requests and replies against `redis-protocol`, an independent
//! implementation.

use bytes::{Bytes, BytesMut};
use memcache_ratelimit_server::resp::{
    parse, Limits, Protocol, ProtocolError, ProtocolErrorKind, Reply,
};
use proptest::collection::vec;
use proptest::prelude::*;
use redis_protocol::resp2::types::OwnedFrame as Frame2;
use redis_protocol::resp3::types::{FrameMap, OwnedFrame as Frame3};

mod common;
use common::multibulk;

/// Everything `parse` makes of `input` fed in pieces of the given sizes
/// (cycled; the rest in one piece): the commands, then how it ended.
fn feed(
    input: &[u8],
    sizes: &[usize],
    limits: &Limits,
) -> (Vec<Vec<Bytes>>, Result<(), ProtocolError>) {
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    let mut rest = input;
    let mut sizes = sizes.iter().cycle();
    loop {
        let take = sizes
            .next()
            .map_or(rest.len(), |&n| n.max(1))
            .min(rest.len());
        let (piece, tail) = rest.split_at(take);
        buf.extend_from_slice(piece);
        rest = tail;
        loop {
            let before = buf.len();
            match parse(&mut buf, limits) {
                Ok(Some(args)) => {
                    assert!(buf.len() < before, "a command consumes its bytes");
                    assert!(!args.is_empty(), "empty commands are skipped");
                    assert!(args.len() <= limits.max_args);
                    commands.push(args);
                }
                Ok(None) => break,
                Err(error) => return (commands, Err(error)),
            }
        }
        if rest.is_empty() {
            return (commands, Ok(()));
        }
    }
}

/// An inline line with every argument in double quotes, escaped.
fn inline_quoted(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for arg in args {
        out.extend_from_slice(b" \"");
        for &b in arg {
            match b {
                b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
                b'\n' => out.extend_from_slice(b"\\n"),
                b' '..=b'~' => out.push(b),
                _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            }
        }
        out.push(b'"');
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn commands() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    vec(vec(vec(any::<u8>(), 0..24), 1..6), 1..5)
}

fn limits() -> impl Strategy<Value = Limits> {
    (0usize..6, 0usize..12, 0usize..40).prop_map(|(max_args, max_bulk, max_inline)| Limits {
        max_args,
        max_bulk,
        max_inline,
    })
}

/// Bytes that look like requests often enough to reach every branch.
fn noise() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        any::<u8>().prop_map(|b| vec![b]),
        prop::sample::select(vec![
            &b"*"[..],
            b"$",
            b"\r",
            b"\n",
            b"\r\n",
            b"*1\r\n",
            b"*2\r\n",
            b"*0\r\n",
            b"*-1\r\n",
            b"$0\r\n",
            b"$3\r\n",
            b"$-1\r\n",
            b"abc",
            b"0",
            b"1",
            b"-",
            b" ",
            b"\t",
            b"\"",
            b"'",
            b"\\",
            b"\\x4",
            b"\\'",
            b"\0",
        ])
        .prop_map(|t| t.to_vec()),
    ];
    vec(token, 0..60).prop_map(|tokens| tokens.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// (a) No input makes `parse` panic, every command consumes bytes, and
    /// how the input is split into reads changes nothing.
    #[test]
    fn arbitrary_bytes(input in prop_oneof![noise(), vec(any::<u8>(), 0..200)], limits in limits(),
                       sizes in vec(1usize..8, 1..6)) {
        let whole = feed(&input, &[], &limits);
        prop_assert_eq!(&feed(&input, &sizes, &limits), &whole);
        prop_assert_eq!(&feed(&input, &[1], &limits), &whole);
    }

    /// (b) Pipelined multibulk commands parse back to themselves, whole or in
    /// pieces.
    #[test]
    fn multibulk_round_trip(commands in commands(), sizes in vec(1usize..40, 1..6)) {
        let input: Vec<u8> = commands.iter().flat_map(|c| multibulk(c)).collect();
        for sizes in [&[][..], &sizes[..], &[1][..]] {
            let (parsed, end) = feed(&input, sizes, &Limits::default());
            prop_assert_eq!(end, Ok(()));
            prop_assert_eq!(&parsed, &commands);
        }
    }

    /// Inline commands with quoted, escaped arguments parse back too.
    #[test]
    fn inline_round_trip(commands in commands(), sizes in vec(1usize..40, 1..6)) {
        let input: Vec<u8> = commands.iter().flat_map(|c| inline_quoted(c)).collect();
        let (parsed, end) = feed(&input, &sizes, &Limits::default());
        prop_assert_eq!(end, Ok(()));
        prop_assert_eq!(&parsed, &commands);
    }

    /// (c) `redis-protocol` encodes the same requests as we do and decodes
    /// them to the arguments `parse` returns.
    #[test]
    fn requests_match_redis_protocol(commands in commands()) {
        let mut input = Vec::new();
        for command in &commands {
            let frame = Frame2::Array(command.iter().cloned().map(Frame2::BulkString).collect());
            let mut encoded = vec![0; redis_protocol::resp2::types::Resp2Frame::encode_len(&frame, false)];
            let len = redis_protocol::resp2::encode::encode(&mut encoded, &frame, false).unwrap();
            prop_assert_eq!(&encoded[..len], &multibulk(command)[..]);
            input.extend_from_slice(&encoded[..len]);
        }
        let mut buf = BytesMut::from(&input[..]);
        let mut at = 0;
        while at < input.len() {
            let (frame, used) = redis_protocol::resp2::decode::decode(&input[at..]).unwrap().unwrap();
            at += used;
            let args = parse(&mut buf, &Limits::default()).unwrap().unwrap();
            prop_assert_eq!(buf.len(), input.len() - at, "both consume the same bytes");
            let Frame2::Array(items) = frame else { panic!("not an array: {frame:?}") };
            let decoded: Vec<Vec<u8>> = items
                .into_iter()
                .map(|item| match item {
                    Frame2::BulkString(data) => data,
                    other => panic!("not a bulk string: {other:?}"),
                })
                .collect();
            prop_assert_eq!(args, decoded);
        }
        prop_assert_eq!(parse(&mut buf, &Limits::default()), Ok(None));
    }

    /// (c) Every reply we encode decodes with `redis-protocol` to the
    /// equivalent frame, in RESP2 and in RESP3.
    #[test]
    fn replies_match_redis_protocol(reply in reply()) {
        let resp2 = reply.to_bytes(Protocol::Resp2);
        let (frame, used) = redis_protocol::resp2::decode::decode(&resp2).unwrap().unwrap();
        prop_assert_eq!(used, resp2.len());
        prop_assert_eq!(frame, resp2_frame(&reply));

        let resp3 = reply.to_bytes(Protocol::Resp3);
        let (frame, used) = redis_protocol::resp3::decode::complete::decode(&resp3).unwrap().unwrap();
        prop_assert_eq!(used, resp3.len());
        prop_assert_eq!(frame, resp3_frame(&reply));
    }

    /// (c) Where `redis-protocol` decodes damaged requests to a non-empty
    /// array of bulk strings, `parse` returns the same arguments after the
    /// same bytes, or refuses a count in a form that Redis's `string2ll`
    /// refuses and Rust's `parse::<isize>` accepts (`+1`, `01`, `-0`).
    #[test]
    fn damaged_requests_match_redis_protocol(input in damaged()) {
        let Ok(Some((Frame2::Array(items), used))) = redis_protocol::resp2::decode::decode(&input) else {
            return Ok(());
        };
        let bulks: Option<Vec<Vec<u8>>> = items
            .into_iter()
            .map(|item| match item {
                Frame2::BulkString(data) => Some(data),
                _ => None,
            })
            .collect();
        let Some(bulks) = bulks.filter(|bulks| !bulks.is_empty()) else {
            return Ok(());
        };
        let mut buf = BytesMut::from(&input[..]);
        match parse(&mut buf, &Limits::default()) {
            Ok(Some(args)) => {
                prop_assert_eq!(args, bulks);
                prop_assert_eq!(buf.len(), input.len() - used);
            }
            Err(error) => prop_assert!(
                matches!(error.kind(), ProtocolErrorKind::InvalidMultibulkLength | ProtocolErrorKind::InvalidBulkLength),
                "{error}"
            ),
            Ok(None) => prop_assert!(false, "incomplete where redis-protocol decoded a frame"),
        }
    }
}

/// Encoded requests with a few bytes replaced, inserted or removed.
fn damaged() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop::sample::select(b"0123+-\r\n$*: ".to_vec());
    let edit = (any::<prop::sample::Index>(), 0u8..3, byte);
    (commands(), vec(edit, 1..4)).prop_map(|(commands, edits)| {
        let mut input: Vec<u8> = commands.iter().flat_map(|c| multibulk(c)).collect();
        for (at, kind, byte) in edits {
            let at = at.index(input.len() + 1);
            match kind {
                0 if at < input.len() => input[at] = byte,
                1 => input.insert(at, byte),
                _ if at < input.len() => {
                    input.remove(at);
                }
                _ => {}
            }
        }
        input
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["(?s).{0,12}", "[a \r\n]{0,8}"]
}

fn scalar() -> impl Strategy<Value = Reply> {
    prop_oneof![
        text().prop_map(Reply::Simple),
        text().prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        vec(any::<u8>(), 0..16).prop_map(Reply::bulk),
        Just(Reply::Null),
    ]
}

/// Trees of replies at most 3 levels deep. Map keys are scalars, as the
/// decoder's hash maps require.
fn reply() -> impl Strategy<Value = Reply> {
    scalar().prop_recursive(3, 48, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Reply::Array),
            vec((scalar(), inner), 0..4).prop_map(|mut pairs| {
                // Keys are unique in a map (the decoder's is a hash map).
                let mut seen = Vec::new();
                pairs.retain(|(k, _)| {
                    let key = resp3_frame(k);
                    let new = !seen.contains(&key);
                    seen.push(key);
                    new
                });
                Reply::Map(pairs)
            }),
        ]
    })
}

/// What the encoder writes for a simple string or an error.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

fn resp2_frame(reply: &Reply) -> Frame2 {
    match reply {
        Reply::Simple(text) => Frame2::SimpleString(one_line(text).into_bytes()),
        Reply::Error(text) => Frame2::Error(one_line(text)),
        Reply::Integer(n) => Frame2::Integer(*n),
        Reply::Bulk(data) => Frame2::BulkString(data.to_vec()),
        Reply::Null => Frame2::Null,
        Reply::Array(items) => Frame2::Array(items.iter().map(resp2_frame).collect()),
        Reply::Map(pairs) => Frame2::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| [resp2_frame(k), resp2_frame(v)])
                .collect(),
        ),
    }
}

fn resp3_frame(reply: &Reply) -> Frame3 {
    match reply {
        Reply::Simple(text) => Frame3::SimpleString {
            data: one_line(text).into_bytes(),
            attributes: None,
        },
        Reply::Error(text) => Frame3::SimpleError {
            data: one_line(text),
            attributes: None,
        },
        Reply::Integer(n) => Frame3::Number {
            data: *n,
            attributes: None,
        },
        Reply::Bulk(data) => Frame3::BlobString {
            data: data.to_vec(),
            attributes: None,
        },
        Reply::Null => Frame3::Null,
        Reply::Array(items) => Frame3::Array {
            data: items.iter().map(resp3_frame).collect(),
            attributes: None,
        },
        Reply::Map(pairs) => Frame3::Map {
            data: pairs
                .iter()
                .map(|(k, v)| (resp3_frame(k), resp3_frame(v)))
                .collect::<FrameMap<_, _>>(),
            attributes: None,
        },
    }
}
