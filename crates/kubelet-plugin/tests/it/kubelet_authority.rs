//! The kubelet's registration client sends the socket path, percent-encoded, as the
//! HTTP/2 `:authority`. No Rust HTTP/2 client can send that (the `http` crate refuses it),
//! so this test speaks HTTP/2 by hand: the preface, SETTINGS, and HEADERS encoded the way
//! grpc-go does (Huffman strings, incremental indexing, so the second request refers to
//! the authority through the dynamic table), then reads the server's frames, decoding its
//! HPACK with the crate's decoder.
//!
//! The control test sends the same bytes to tonic without the shim and sees h2's
//! RST_STREAM PROTOCOL_ERROR: the blocker the shim removes. If that control ever fails,
//! h2/http accept such authorities now and the shim could be retired.

use std::path::Path;

use crate::common::*;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::wrappers::UnixListenerStream;
use topoalign_h2_authority::{Decoder, Encoder, Header};
use topoalign_h2_authority::{PREFACE, frame_header};
use topoalign_kubelet_plugin::RegistrationService;
use topoalign_kubelet_plugin::pb::pluginregistration as reg;

const HEADERS: u8 = 0x1;
const DATA: u8 = 0x0;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

fn kubelet_authority(socket: &Path) -> String {
    socket
        .to_string_lossy()
        .replace('%', "%25")
        .replace('/', "%2F")
}

/// What the server answered on one stream.
#[derive(Debug, PartialEq)]
enum Answer {
    Ok {
        headers: Vec<Header>,
        data: Vec<u8>,
        trailers: Vec<Header>,
    },
    Reset(u32),
    GoAway(u32),
}

struct RawClient {
    sock: UnixStream,
    enc: Encoder,
    dec: Decoder,
    buf: Vec<u8>,
}

impl RawClient {
    async fn connect(path: &Path) -> RawClient {
        let mut sock = UnixStream::connect(path).await.unwrap();
        let mut hello = PREFACE.to_vec();
        frame_header(0, SETTINGS, 0, 0, &mut hello);
        sock.write_all(&hello).await.unwrap();
        RawClient {
            sock,
            enc: Encoder::default(),
            dec: Decoder::new(4096, 1 << 20),
            buf: Vec::new(),
        }
    }

    async fn call(&mut self, stream: u32, authority: &str, path: &str, message: &[u8]) -> Answer {
        let headers = vec![
            Header::new(":method", "POST"),
            Header::new(":scheme", "http"),
            Header::new(":path", path),
            Header::new(":authority", authority),
            Header::new("content-type", "application/grpc"),
            Header::new("user-agent", "grpc-go/1.72.2"),
            Header::new("te", "trailers"),
            Header::new("grpc-timeout", "9999935u"),
        ];
        let mut block = Vec::new();
        self.enc.encode(&headers, &mut block);
        let mut out = Vec::new();
        frame_header(block.len(), HEADERS, END_HEADERS, stream, &mut out);
        out.extend_from_slice(&block);
        let mut grpc = vec![0u8];
        grpc.extend_from_slice(&(message.len() as u32).to_be_bytes());
        grpc.extend_from_slice(message);
        frame_header(grpc.len(), DATA, END_STREAM, stream, &mut out);
        out.extend_from_slice(&grpc);
        self.sock.write_all(&out).await.unwrap();

        let (mut first, mut data) = (None, Vec::new());
        loop {
            let (kind, flags, sid, payload) = self.frame().await;
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    let mut ack = Vec::new();
                    frame_header(0, SETTINGS, ACK, 0, &mut ack);
                    self.sock.write_all(&ack).await.unwrap();
                }
                GOAWAY => {
                    return Answer::GoAway(u32::from_be_bytes(payload[4..8].try_into().unwrap()));
                }
                RST_STREAM if sid == stream => {
                    return Answer::Reset(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                }
                HEADERS if sid == stream => {
                    assert_ne!(flags & END_HEADERS, 0, "the server split its headers");
                    let h = self.dec.decode(&payload).unwrap();
                    if flags & END_STREAM != 0 {
                        return Answer::Ok {
                            headers: first.unwrap_or_default(),
                            data,
                            trailers: h,
                        };
                    }
                    first = Some(h);
                }
                DATA if sid == stream => data.extend_from_slice(&payload),
                _ => {}
            }
        }
    }

    async fn frame(&mut self) -> (u8, u8, u32, Vec<u8>) {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let f: Vec<u8> = self.buf.drain(..9 + len).collect();
                    let sid = u32::from_be_bytes([f[5], f[6], f[7], f[8]]) & 0x7fff_ffff;
                    return (f[3], f[4], sid, f[9..].to_vec());
                }
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                self.sock.read(&mut chunk),
            )
            .await
            .expect("the server answers")
            .unwrap();
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn header<'a>(hs: &'a [Header], name: &str) -> Option<&'a [u8]> {
    hs.iter()
        .find(|h| h.name == name.as_bytes())
        .map(|h| h.value.as_slice())
}

#[tokio::test]
async fn registration_answers_the_kubelets_percent_encoded_authority() {
    let s = Served::start().await;
    let sock = s.config.registration_socket();
    let authority = kubelet_authority(&sock);
    assert!(authority.starts_with("%2F") && authority.ends_with("%2Ftopoalign.dev-reg.sock"));
    let mut c = RawClient::connect(&sock).await;

    let Answer::Ok {
        headers,
        data,
        trailers,
    } = c
        .call(
            1,
            &authority,
            "/pluginregistration.Registration/GetInfo",
            &[],
        )
        .await
    else {
        panic!("GetInfo was refused");
    };
    assert_eq!(header(&headers, ":status"), Some(&b"200"[..]));
    assert_eq!(
        header(&trailers, "grpc-status"),
        Some(&b"0"[..]),
        "{trailers:?}"
    );
    assert_eq!(data[0], 0);
    let len = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
    let info = reg::PluginInfo::decode(&data[5..5 + len]).unwrap();
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, "topoalign.dev");
    assert_eq!(info.endpoint, s.config.dra_socket().to_string_lossy());

    // The second call's authority comes from the client's dynamic table.
    let status = reg::RegistrationStatus {
        plugin_registered: true,
        error: String::new(),
    };
    let mut rx = s.plugin.registration_status();
    let answer = c
        .call(
            3,
            &authority,
            "/pluginregistration.Registration/NotifyRegistrationStatus",
            &status.encode_to_vec(),
        )
        .await;
    let Answer::Ok { trailers, .. } = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(header(&trailers, "grpc-status"), Some(&b"0"[..]));
    rx.changed().await.unwrap();
    assert!(rx.borrow().as_ref().unwrap().registered);
    // This client answers no PING: shutdown drops it after the grace period.
    let t = std::time::Instant::now();
    s.stop().await;
    assert!(t.elapsed() < std::time::Duration::from_secs(8));
    drop(c);
}

#[tokio::test]
async fn without_the_shim_h2_resets_the_stream() {
    let s = Served::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("plain-reg.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let service =
        reg::registration_server::RegistrationServer::new(RegistrationService(s.plugin.clone()));
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(UnixListenerStream::new(listener)),
    );
    let mut c = RawClient::connect(&sock).await;
    let answer = c
        .call(
            1,
            &kubelet_authority(&sock),
            "/pluginregistration.Registration/GetInfo",
            &[],
        )
        .await;
    // 0x1 = PROTOCOL_ERROR.
    assert_eq!(
        answer,
        Answer::Reset(0x1),
        "h2 now accepts a percent-encoded authority: the shim may be retired"
    );
    // The same client with a plain authority works against the plain server.
    let ok = c
        .call(
            3,
            "localhost",
            "/pluginregistration.Registration/GetInfo",
            &[],
        )
        .await;
    assert!(matches!(ok, Answer::Ok { .. }), "{ok:?}");
    server.abort();
    drop(c);
    s.stop().await;
}
