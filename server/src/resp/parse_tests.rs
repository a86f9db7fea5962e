use super::*;
use ProtocolErrorKind::*;

fn limits() -> Limits {
    Limits::default()
}

/// Every command in `input`, then what the last call returned.
fn all(input: &[u8], limits: &Limits) -> (Vec<Vec<Vec<u8>>>, Result<(), ProtocolError>) {
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    loop {
        match parse(&mut buf, limits) {
            Ok(Some(args)) => out.push(args.iter().map(|a| a.to_vec()).collect()),
            Ok(None) => return (out, Ok(())),
            Err(e) => return (out, Err(e)),
        }
    }
}

/// The one command in `input`.
fn one(input: &[u8]) -> Vec<Vec<u8>> {
    let (mut commands, end) = all(input, &limits());
    assert_eq!(end, Ok(()), "{:?}", String::from_utf8_lossy(input));
    assert_eq!(commands.len(), 1, "{:?}", String::from_utf8_lossy(input));
    commands.remove(0)
}

fn err(input: &[u8], limits: &Limits) -> ProtocolError {
    match all(input, limits).1 {
        Err(e) => e,
        Ok(()) => panic!("no error for {:?}", String::from_utf8_lossy(input)),
    }
}

#[test]
fn error_texts() {
    let big_line = vec![b'a'; PROTO_INLINE_MAX_SIZE + 1];
    let cases: &[(&[u8], ProtocolErrorKind, &str)] = &[
        (
            &big_line,
            TooBigInlineRequest,
            "Protocol error: too big inline request",
        ),
        (
            b"SET \"a\r\n",
            UnbalancedQuotes,
            "Protocol error: unbalanced quotes in request",
        ),
        (
            b"*123456789012345678901",
            TooBigMbulkCountString,
            "Protocol error: too big mbulk count string",
        ),
        (
            b"*x\r\n",
            InvalidMultibulkLength,
            "Protocol error: invalid multibulk length",
        ),
        (
            b"*1\r\n:1\r\n",
            ExpectedDollar(b':'),
            "Protocol error: expected '$', got ':'",
        ),
        (
            b"*1\r\n$123456789012345678901",
            TooBigBulkCountString,
            "Protocol error: too big bulk count string",
        ),
        (
            b"*1\r\n$-3\r\n",
            InvalidBulkLength,
            "Protocol error: invalid bulk length",
        ),
    ];
    for &(input, kind, text) in cases {
        let e = err(input, &limits());
        assert_eq!(e.kind(), kind, "{:?}", String::from_utf8_lossy(input));
        assert_eq!(e.to_string(), text);
    }
}

#[test]
fn malformed_multibulk() {
    let cases: &[(&[u8], ProtocolErrorKind)] = &[
        (b"*\r\n", InvalidMultibulkLength),
        (b"*+1\r\n", InvalidMultibulkLength),
        (b"*01\r\n", InvalidMultibulkLength),
        (b"*-0\r\n", InvalidMultibulkLength),
        (b"* 1\r\n", InvalidMultibulkLength),
        (b"*1 \r\n", InvalidMultibulkLength),
        (b"*1025\r\n", InvalidMultibulkLength),
        (b"*99999999999999999999\r\n", InvalidMultibulkLength),
        (b"*1\r\n*1\r\n", ExpectedDollar(b'*')),
        (b"*1\r\n\r\n", ExpectedDollar(b'\r')),
        (b"*2\r\n$1\r\na\r\nb", ExpectedDollar(b'b')),
        (b"*1\r\n$\r\n", InvalidBulkLength),
        (b"*1\r\n$1048577\r\n", InvalidBulkLength),
        (b"*1\r\n$9223372036854775808\r\n", InvalidBulkLength),
        (b"*1\r\n$x\r\n", InvalidBulkLength),
    ];
    for &(input, kind) in cases {
        assert_eq!(
            err(input, &limits()).kind(),
            kind,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    assert_eq!(
        err(b"*1\r\n\xe9", &limits()).to_string(),
        "Protocol error: expected '$', got '\u{e9}'"
    );
}

#[test]
fn limits_apply_before_the_data() {
    assert_eq!(
        err(b"*2000000\r\n", &limits()).kind(),
        InvalidMultibulkLength
    );
    assert_eq!(
        err(b"*1\r\n$999999999\r\n", &limits()).kind(),
        InvalidBulkLength
    );
    // At the top level, `$...` is an inline command.
    assert_eq!(one(b"$999999999\r\n"), vec![b"$999999999".to_vec()]);
    let small = Limits {
        max_args: 2,
        max_bulk: 3,
        max_inline: 8,
    };
    assert_eq!(err(b"*3\r\n", &small).kind(), InvalidMultibulkLength);
    assert_eq!(err(b"*2\r\n$4\r\n", &small).kind(), InvalidBulkLength);
    assert_eq!(err(b"a b c\n", &small).kind(), TooBigInlineRequest);
    assert_eq!(err(b"123456789", &small).kind(), TooBigInlineRequest);
    assert_eq!(all(b"12345678", &small), (vec![], Ok(())));
    assert_eq!(
        all(b"1234567\r\n", &small).0,
        vec![vec![b"1234567".to_vec()]]
    );
    assert_eq!(
        all(b"a b\n*2\r\n$3\r\nabc\r\n$0\r\n\r\n", &small).0.len(),
        2
    );
    // A count line waits for its CR up to 20 characters, then is refused.
    assert_eq!(
        all(&[b"*".as_slice(), &[b'1'; 20]].concat(), &small),
        (vec![], Ok(()))
    );
    assert_eq!(
        err(&[b"*".as_slice(), &[b'1'; 21]].concat(), &small).kind(),
        TooBigMbulkCountString
    );
}

#[test]
fn a_declared_bulk_waits_without_copying() {
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1000000\r\n"[..]);
    assert_eq!(parse(&mut buf, &limits()), Ok(None));
    assert_eq!(buf.len(), 23, "nothing consumed");
    buf.extend_from_slice(&vec![b'v'; 1_000_000]);
    assert_eq!(
        parse(&mut buf, &limits()),
        Ok(None),
        "the CRLF after it is missing"
    );
    buf.extend_from_slice(b"\r\n");
    let args = parse(&mut buf, &limits()).unwrap().unwrap();
    assert_eq!(args[1].len(), 1_000_000);
    assert!(buf.is_empty());
}

#[test]
fn empty_requests_are_skipped() {
    let input = b"\r\n\n   \t\r\n*0\r\n*-1\r\n*-100\r\n\0junk\r\nPING\r\n*0\r\n";
    assert_eq!(
        all(input, &limits()),
        (vec![vec![b"PING".to_vec()]], Ok(()))
    );
    let mut buf = BytesMut::from(&b"\r\n*0\r\n"[..]);
    assert_eq!(parse(&mut buf, &limits()), Ok(None));
    assert!(buf.is_empty(), "empty requests are consumed");
}

#[test]
fn multibulk() {
    assert_eq!(one(b"*1\r\n$4\r\nPING\r\n"), vec![b"PING".to_vec()]);
    assert_eq!(
        one(b"*3\r\n$0\r\n\r\n$2\r\n\r\n\r\n$1\r\n\0\r\n"),
        vec![vec![], b"\r\n".to_vec(), vec![0]]
    );
    // As in Redis: the byte after a header's CR and the two bytes after a
    // bulk string are skipped unchecked.
    assert_eq!(one(b"*1\rX$3\rYfooZZ"), vec![b"foo".to_vec()]);
}

#[test]
fn inline_words() {
    let cases: &[(&[u8], &[&[u8]])] = &[
        (b"PING\r\n", &[b"PING"]),
        (b"PING\n", &[b"PING"]),
        (b"  SET\t k   v \r\n", &[b"SET", b"k", b"v"]),
        (b"a\rb\n", &[b"a", b"b"]),
        (b"a\x0bb\n", &[b"a\x0bb"]),
        (b"\x0b\x0ca\n", &[b"a"]),
        (b"SET k \"\"\n", &[b"SET", b"k", b""]),
        (b"SET k ''\n", &[b"SET", b"k", b""]),
        (b"\"a b\" 'c d'\n", &[b"a b", b"c d"]),
        (
            b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n",
            &[b"\n\r\t\x08\x07\\\"q"],
        ),
        (b"\"\\x41\\x7a\\xff\\xg1\\x4\"\n", &[b"Az\xffxg1x4"]),
        (
            b"'it\\'s' '\\n\\x41\\\\ x'\n",
            &[b"it's", b"\\n\\x41\\\\ x"],
        ),
        (b"ab\"c d\"\n", &[b"abc d"]),
        (b"ab'c' e\n", &[b"abc", b"e"]),
        (b"\"a\"\t\"b\"\x0b'c'\x0c\n", &[b"a", b"b", b"c"]),
        (b"a\0b c\n", &[b"a"]),
        (b"\"a\0b\" c\n", &[]),
        (b"caf\xc3\xa9 \xff\n", &[b"caf\xc3\xa9", b"\xff"]),
    ];
    for &(input, words) in cases {
        let (commands, end) = all(input, &limits());
        let got: Vec<Vec<u8>> = commands.into_iter().flatten().collect();
        if input == b"\"a\0b\" c\n" {
            assert_eq!(end.map_err(|e| e.kind()), Err(UnbalancedQuotes));
            continue;
        }
        assert_eq!(end, Ok(()), "{:?}", String::from_utf8_lossy(input));
        let want: Vec<Vec<u8>> = words.iter().map(|w| w.to_vec()).collect();
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn inline_unbalanced_quotes() {
    for input in [
        &b"\"abc\n"[..],
        b"'abc\n",
        b"\"a\"b\n",
        b"'a'b\n",
        b"\"abc\\\"\n",
        b"\"abc\\\n",
        b"'a\\'\n",
        b"x \"a\"\"b\"\n",
    ] {
        assert_eq!(
            err(input, &limits()).kind(),
            UnbalancedQuotes,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn inline_line_limit() {
    let max = PROTO_INLINE_MAX_SIZE;
    let mut exact = vec![b'a'; max - 1];
    exact.extend_from_slice(b"\r\n");
    assert_eq!(one(&exact)[0].len(), max - 1);
    assert_eq!(
        all(&vec![b'a'; max], &limits()),
        (vec![], Ok(())),
        "waits at the limit"
    );
    let mut over = vec![b'a'; max + 1];
    over.push(b'\n');
    assert_eq!(
        err(&over, &limits()).kind(),
        TooBigInlineRequest,
        "refused even with its LF"
    );
    let words = "a ".repeat(1025);
    assert_eq!(
        err(format!("{words}\n").as_bytes(), &limits()).kind(),
        TooBigInlineRequest
    );
    assert_eq!(
        one(format!("{}\n", "a ".repeat(1024)).as_bytes()).len(),
        1024
    );
}

#[test]
fn arguments_are_slices_of_the_buffer() {
    let mut buf = BytesMut::from(
        &b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nSET plain \"quo\\x74ed\" \"as is\"\r\n"[..],
    );
    let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
    let inside = |b: &Bytes| range.contains(&(b.as_ptr() as usize));
    let first = parse(&mut buf, &limits()).unwrap().unwrap();
    assert!(first.iter().all(inside));
    let second = parse(&mut buf, &limits()).unwrap().unwrap();
    assert_eq!(second, vec!["SET", "plain", "quoted", "as is"]);
    assert!(inside(&second[0]) && inside(&second[1]) && inside(&second[3]));
    assert!(!inside(&second[2]), "an escaped word is a copy");
}

#[test]
fn byte_by_byte_equals_whole() {
    let input: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nv\r\nv\n\r\n\r\nGET \"k\" 'x'\n*0\r\n*1\r\n$0\r\n\r\nEND\r\n";
    let (whole, end) = all(input, &limits());
    assert_eq!(end, Ok(()));
    assert_eq!(whole.len(), 4);
    let mut buf = BytesMut::new();
    let mut fed = Vec::new();
    for &b in input {
        buf.extend_from_slice(&[b]);
        while let Some(args) = parse(&mut buf, &limits()).unwrap() {
            fed.push(args.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
        }
    }
    assert_eq!(fed, whole);
}

#[test]
fn string2ll_matches_redis() {
    let cases: &[(&[u8], Option<i64>)] = &[
        (b"0", Some(0)),
        (b"7", Some(7)),
        (b"-7", Some(-7)),
        (b"9223372036854775807", Some(i64::MAX)),
        (b"-9223372036854775808", Some(i64::MIN)),
        (b"9223372036854775808", None),
        (b"-9223372036854775809", None),
        (b"18446744073709551616", None),
        (b"", None),
        (b"-", None),
        (b"-0", None),
        (b"00", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"1a", None),
        (b"000000000000000000001", None),
    ];
    for &(input, want) in cases {
        assert_eq!(
            string2ll(input),
            want,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}
