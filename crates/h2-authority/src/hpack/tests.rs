use super::*;
use proptest::prelude::*;

fn h(n: &str, v: &str) -> Header {
    Header::new(n, v)
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rfc7541_c3_requests_without_huffman() {
    let mut d = Decoder::new(4096, 1 << 20);
    let first = d
        .decode(&hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"))
        .unwrap();
    assert_eq!(
        first,
        vec![
            h(":method", "GET"),
            h(":scheme", "http"),
            h(":path", "/"),
            h(":authority", "www.example.com")
        ]
    );
    assert_eq!(d.table().len(), 1);
    let second = d
        .decode(&hex("8286 84be 5808 6e6f 2d63 6163 6865"))
        .unwrap();
    assert_eq!(second[3], h(":authority", "www.example.com"));
    assert_eq!(second[4], h("cache-control", "no-cache"));
    let third = d
        .decode(&hex(
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ))
        .unwrap();
    assert_eq!(
        third,
        vec![
            h(":method", "GET"),
            h(":scheme", "https"),
            h(":path", "/index.html"),
            h(":authority", "www.example.com"),
            h("custom-key", "custom-value")
        ]
    );
    assert_eq!(d.table().len(), 3);
}

#[test]
fn rfc7541_c4_requests_with_huffman() {
    let mut d = Decoder::new(4096, 1 << 20);
    let first = d
        .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
        .unwrap();
    assert_eq!(first[3], h(":authority", "www.example.com"));
    let second = d.decode(&hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
    assert_eq!(second[4], h("cache-control", "no-cache"));
    let third = d
        .decode(&hex(
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ))
        .unwrap();
    assert_eq!(third[4], h("custom-key", "custom-value"));
}

#[test]
fn integers_of_rfc7541_c1() {
    // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix; C.1.3: 42, 8 bits.
    let mut out = Vec::new();
    encode_int(10, 5, 0, &mut out);
    assert_eq!(out, [0x0a]);
    out.clear();
    encode_int(1337, 5, 0, &mut out);
    assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    let mut pos = 0;
    assert_eq!(decode_int(&out, &mut pos, 5).unwrap(), 1337);
    assert_eq!(pos, 3);
}

#[test]
fn refuses_malformed_blocks() {
    let mut d = Decoder::new(4096, 1 << 20);
    assert_eq!(d.decode(&[0x80]), Err(HpackError::BadIndex(0)));
    assert_eq!(d.decode(&[0xbe]), Err(HpackError::BadIndex(62)));
    assert_eq!(d.decode(&[0x41, 0x05, b'a']), Err(HpackError::Truncated));
    assert_eq!(d.decode(&[0x82, 0x20]), Err(HpackError::LateSizeUpdate));
    assert!(matches!(
        d.decode(&[0x3f, 0xe1, 0xff, 0x03]),
        Err(HpackError::TableSize { .. })
    ));
    assert_eq!(
        d.decode(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        Err(HpackError::IntegerOverflow)
    );
    let mut small = Decoder::new(4096, 40);
    assert_eq!(
        small.decode(&hex("8286")),
        Err(HpackError::ListTooLarge(40))
    );
}

#[test]
fn literal_block_keeps_never_indexed() {
    let headers = vec![
        h(":authority", "localhost"),
        Header {
            name: b"authorization".to_vec(),
            value: b"secret".to_vec(),
            sensitive: true,
        },
        h("x-custom", "v"),
    ];
    let mut out = Vec::new();
    encode_literal_block(&headers, &mut out);
    let mut d = Decoder::new(4096, 1 << 20);
    assert_eq!(d.decode(&out).unwrap(), headers);
    assert!(d.table().is_empty());
}

fn header_strategy() -> impl Strategy<Value = Header> {
    let name = prop_oneof![
        Just(":authority".to_string()),
        Just(":path".to_string()),
        Just("content-type".to_string()),
        "[a-z-]{1,12}",
    ];
    let value = prop_oneof![
        Just("".to_string()),
        Just("application/grpc".to_string()),
        "[ -~]{0,40}",
        "\\PC{0,10}",
    ];
    (name, value, proptest::bool::weighted(0.1)).prop_map(|(n, v, s)| Header {
        name: n.into_bytes(),
        value: v.into_bytes(),
        sensitive: s,
    })
}

proptest! {
    #[test]
    fn encoder_decoder_round_trip(
        blocks in proptest::collection::vec(proptest::collection::vec(header_strategy(), 0..12), 1..8),
        sizes in proptest::collection::vec(prop_oneof![Just(None), (0usize..5000).prop_map(Some)], 8),
        huffman in any::<bool>(),
    ) {
        let mut enc = Encoder { huffman, ..Encoder::default() };
        let mut dec = Decoder::new(8192, 1 << 20);
        for (block, size) in blocks.iter().zip(sizes) {
            if let Some(s) = size {
                enc.set_max_size(s);
            }
            let mut wire = Vec::new();
            enc.encode(block, &mut wire);
            let decoded = dec.decode(&wire).unwrap();
            prop_assert_eq!(&decoded, block);
            // Re-encoding with literals decodes to the same list on a fresh decoder.
            let mut lit = Vec::new();
            encode_literal_block(&decoded, &mut lit);
            prop_assert_eq!(&Decoder::new(4096, 1 << 20).decode(&lit).unwrap(), block);
        }
    }

    #[test]
    fn arbitrary_blocks_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Decoder::new(4096, 1 << 16).decode(&bytes);
    }
}
