use super::*;
use crate::hpack::Encoder;

const KUBELET_AUTHORITY: &str =
    "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Ftopoalign.dev-reg.sock";

fn request_headers(authority: &str, path: &str) -> Vec<Header> {
    vec![
        Header::new(":method", "POST"),
        Header::new(":scheme", "http"),
        Header::new(":path", path),
        Header::new(":authority", authority),
        Header::new("content-type", "application/grpc"),
        Header::new("user-agent", "grpc-go/1.72.0"),
        Header::new("te", "trailers"),
    ]
}

/// Splits server-bound bytes into frames: (type, flags, stream, payload).
fn frames(bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    assert_eq!(&bytes[..24], PREFACE);
    let mut v = Vec::new();
    let mut p = 24;
    while p < bytes.len() {
        let len = u32::from_be_bytes([0, bytes[p], bytes[p + 1], bytes[p + 2]]) as usize;
        let sid = u32::from_be_bytes([bytes[p + 5], bytes[p + 6], bytes[p + 7], bytes[p + 8]]);
        v.push((
            bytes[p + 3],
            bytes[p + 4],
            sid,
            bytes[p + 9..p + 9 + len].to_vec(),
        ));
        p += 9 + len;
    }
    assert_eq!(p, bytes.len());
    v
}

fn client_bytes(blocks: &[Vec<Header>], enc: &mut Encoder) -> Vec<u8> {
    let mut b = PREFACE.to_vec();
    frame_header(0, 0x4, 0, 0, &mut b); // SETTINGS
    for (i, headers) in blocks.iter().enumerate() {
        let sid = 2 * i as u32 + 1;
        let mut block = Vec::new();
        enc.encode(headers, &mut block);
        frame_header(block.len(), TYPE_HEADERS, FLAG_END_HEADERS, sid, &mut b);
        b.extend_from_slice(&block);
        frame_header(5, 0x0, FLAG_END_STREAM, sid, &mut b); // DATA: empty gRPC message
        b.extend_from_slice(&[0, 0, 0, 0, 0]);
    }
    b
}

fn run(input: &[u8], chunk: usize) -> (Vec<u8>, AuthorityRewriter) {
    let mut r = AuthorityRewriter::default();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for c in input.chunks(chunk) {
        buf.extend_from_slice(c);
        r.feed(&mut buf, &mut out);
    }
    assert!(buf.is_empty() || r.is_passthrough());
    (out, r)
}

#[test]
fn replaces_percent_encoded_authority_and_keeps_everything_else() {
    assert!(!authority_is_valid(KUBELET_AUTHORITY.as_bytes()));
    assert!(authority_is_valid(b"localhost"));
    let blocks = vec![
        request_headers(
            KUBELET_AUTHORITY,
            "/pluginregistration.Registration/GetInfo",
        ),
        // The second request reuses the client's dynamic table entries.
        request_headers(
            KUBELET_AUTHORITY,
            "/pluginregistration.Registration/NotifyRegistrationStatus",
        ),
        request_headers("localhost", "/x"),
    ];
    let input = client_bytes(&blocks, &mut Encoder::default());
    for chunk in [1, 7, 4096] {
        let (out, r) = run(&input, chunk);
        assert_eq!(r.rewritten(), 2);
        let fr = frames(&out);
        assert_eq!(fr.len(), 1 + 2 * blocks.len());
        assert_eq!(fr[0].0, 0x4);
        let mut server = Decoder::new(4096, 1 << 20);
        for (i, want) in blocks.iter().enumerate() {
            let (kind, flags, sid, payload) = &fr[1 + 2 * i];
            assert_eq!(
                (*kind, *flags, *sid),
                (TYPE_HEADERS, FLAG_END_HEADERS, 2 * i as u32 + 1)
            );
            let got = server.decode(payload).unwrap();
            let mut expect = want.clone();
            expect[3].value = b"localhost".to_vec();
            assert_eq!(got, expect);
            assert_eq!(fr[2 + 2 * i].3, vec![0, 0, 0, 0, 0]);
        }
        // Literal-only re-encoding: the server's table never grows.
        assert!(server.table().is_empty());
    }
}

#[test]
fn reassembles_continuation_padding_and_priority() {
    let mut enc = Encoder::default();
    let mut headers = request_headers(KUBELET_AUTHORITY, "/p");
    headers.push(Header::new("x-big", "v".repeat(20000)));
    let mut block = Vec::new();
    enc.encode(&headers, &mut block);
    let mut input = PREFACE.to_vec();
    // HEADERS with PADDED + PRIORITY + END_STREAM, then two CONTINUATIONs.
    let (a, rest) = block.split_at(100);
    let (b, c) = rest.split_at(rest.len() / 2);
    let pad = 3u8;
    frame_header(
        1 + 5 + a.len() + pad as usize,
        TYPE_HEADERS,
        FLAG_PADDED | FLAG_PRIORITY | FLAG_END_STREAM,
        1,
        &mut input,
    );
    input.push(pad);
    input.extend_from_slice(&[0, 0, 0, 0, 15]);
    input.extend_from_slice(a);
    input.extend_from_slice(&[0, 0, 0]);
    frame_header(b.len(), TYPE_CONTINUATION, 0, 1, &mut input);
    input.extend_from_slice(b);
    frame_header(c.len(), TYPE_CONTINUATION, FLAG_END_HEADERS, 1, &mut input);
    input.extend_from_slice(c);
    let (out, r) = run(&input, 333);
    assert_eq!(r.rewritten(), 1);
    let fr = frames(&out);
    assert_eq!(fr[0].0, TYPE_HEADERS);
    assert_eq!(fr[0].1, FLAG_PRIORITY | FLAG_END_STREAM);
    assert_eq!(&fr[0].3[..5], &[0, 0, 0, 0, 15]);
    assert!(fr.iter().all(|f| f.3.len() <= SAFE_FRAME_SIZE));
    let last = fr.last().unwrap();
    assert_eq!((last.0, last.1), (TYPE_CONTINUATION, FLAG_END_HEADERS));
    let mut joined = fr[0].3[5..].to_vec();
    for f in &fr[1..] {
        joined.extend_from_slice(&f.3);
    }
    let got = Decoder::new(4096, 1 << 20).decode(&joined).unwrap();
    assert_eq!(got[3].value, b"localhost");
    assert_eq!(got[7].value.len(), 20000);
}

#[test]
fn steps_aside_on_what_it_cannot_parse() {
    // Not HTTP/2: forwarded unchanged.
    let (out, r) = run(b"GET / HTTP/1.1\r\n\r\n", 3);
    assert_eq!(out, b"GET / HTTP/1.1\r\n\r\n");
    assert!(r.is_passthrough());
    // A corrupt header block: forwarded unchanged for h2 to refuse.
    let mut input = PREFACE.to_vec();
    frame_header(1, TYPE_HEADERS, FLAG_END_HEADERS, 1, &mut input);
    input.push(0xff);
    frame_header(0, 0x4, 0, 0, &mut input);
    let (out, r) = run(&input, 5);
    assert_eq!(out, input);
    assert!(r.is_passthrough());
    // A frame between HEADERS and CONTINUATION.
    let mut input = PREFACE.to_vec();
    frame_header(1, TYPE_HEADERS, 0, 1, &mut input);
    input.push(0x82);
    frame_header(0, 0x4, 0, 0, &mut input);
    let (out, r) = run(&input, 64);
    assert_eq!(out, input);
    assert!(r.is_passthrough());
}
