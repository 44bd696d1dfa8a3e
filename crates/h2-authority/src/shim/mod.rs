//! The HTTP/2 `:authority` shim in front of tonic.
//!
//! # The problem
//! The kubelet's plugin-registration client dials the raw socket path, and grpc-go then
//! sends that path, percent-encoded, as the HTTP/2 `:authority`
//! (`%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2F<driver>-reg.sock`). The `http` crate
//! refuses `%` in an authority, so `h2` (under hyper and tonic) answers the request with
//! RST_STREAM PROTOCOL_ERROR and the kubelet logs "RegisterPlugin error ... PROTOCOL_ERROR".
//! Upstream knows (h2 PR 487 is open; grpc-rust issues 243 and 1876).
//!
//! # The choice
//! Patching or forking `h2`/`http` would have to be redone on every update of either.
//! Instead, this module sits between the accepted unix connection and tonic and rewrites
//! only what `h2` would refuse, using nothing of their internals:
//!
//! * client→server bytes are parsed into HTTP/2 frames after the connection preface;
//!   every frame except HEADERS/CONTINUATION passes through byte for byte (DATA payloads
//!   are streamed, not buffered);
//! * each client header block is decoded with our HPACK decoder, which mirrors the client's
//!   dynamic table; an `:authority` that `http::uri::Authority` refuses is replaced by
//!   `localhost`; the block is re-encoded with literals only ("without indexing", or
//!   "never indexed" where the client said so), so the server's own table stays empty and
//!   nothing else needs mirroring; it is sent as one HEADERS frame plus CONTINUATION frames
//!   of at most 16384 octets (the minimum every HTTP/2 peer accepts);
//! * server→client bytes pass through untouched.
//!
//! The validity test is `http`'s own parser, so the day `http` accepts such authorities
//! the shim stops changing them. Anything it cannot parse (no preface, an HPACK error, a
//! CONTINUATION out of place) makes it forward the original bytes and step aside for the
//! rest of the connection, so `h2` reports the protocol error itself.

use crate::hpack::{self, Decoder, Header};
use http::uri::Authority;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_LEN: usize = 9;
const TYPE_HEADERS: u8 = 0x1;
const TYPE_CONTINUATION: u8 = 0x9;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// The largest frame payload every HTTP/2 peer must accept.
const SAFE_FRAME_SIZE: usize = 16384;
/// The largest header block (encoded) the shim buffers.
const MAX_BLOCK: usize = 1 << 20;
/// The authority put in place of one `http` refuses.
pub const REPLACEMENT_AUTHORITY: &str = "localhost";

/// Whether `h2` (through `http`) would accept `value` as an `:authority`.
pub fn authority_is_valid(value: &[u8]) -> bool {
    Authority::try_from(value).is_ok()
}

#[derive(Debug)]
enum State {
    /// Matching the preface; the number of octets matched so far.
    Preface(usize),
    /// At a frame boundary.
    Frames,
    /// Streaming the rest of a non-header frame's payload.
    Forwarding(usize),
    /// Stepped aside: everything passes through.
    Passthrough,
}

#[derive(Debug)]
struct PendingBlock {
    stream_id: u32,
    flags: u8,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
    raw: Vec<u8>,
}

/// The client→server half of the shim as a pure byte transformer (no I/O), fed with
/// whatever arrives and producing what the server must see.
#[derive(Debug)]
pub struct AuthorityRewriter {
    state: State,
    decoder: Decoder,
    pending: Option<PendingBlock>,
    rewritten: u64,
}

impl Default for AuthorityRewriter {
    fn default() -> Self {
        Self {
            state: State::Preface(0),
            decoder: Decoder::new(1 << 16, 1 << 20),
            pending: None,
            rewritten: 0,
        }
    }
}

impl AuthorityRewriter {
    /// How many `:authority` values were replaced so far.
    pub fn rewritten(&self) -> u64 {
        self.rewritten
    }

    /// Whether the shim has stepped aside for the rest of the connection.
    pub fn is_passthrough(&self) -> bool {
        matches!(self.state, State::Passthrough)
    }

    /// Consumes what it can from the front of `input` (incomplete frames stay there) and
    /// appends what the server must receive to `out`.
    pub fn feed(&mut self, input: &mut Vec<u8>, out: &mut Vec<u8>) {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            match self.state {
                State::Passthrough => {
                    out.extend_from_slice(rest);
                    pos = input.len();
                    break;
                }
                State::Preface(seen) => {
                    let n = rest.len().min(PREFACE.len() - seen);
                    if rest[..n] != PREFACE[seen..seen + n] {
                        // Not HTTP/2 with prior knowledge: let the server judge.
                        self.state = State::Passthrough;
                        continue;
                    }
                    out.extend_from_slice(&rest[..n]);
                    pos += n;
                    self.state = if seen + n == PREFACE.len() {
                        State::Frames
                    } else {
                        State::Preface(seen + n)
                    };
                    if n == 0 || matches!(self.state, State::Preface(_)) {
                        break;
                    }
                }
                State::Forwarding(left) => {
                    let n = rest.len().min(left);
                    out.extend_from_slice(&rest[..n]);
                    pos += n;
                    self.state = if n == left {
                        State::Frames
                    } else {
                        State::Forwarding(left - n)
                    };
                    if n < left {
                        break;
                    }
                }
                State::Frames => {
                    if rest.len() < FRAME_HEADER_LEN {
                        break;
                    }
                    let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
                    let kind = rest[3];
                    let is_header = kind == TYPE_HEADERS || kind == TYPE_CONTINUATION;
                    if self.pending.is_some() && kind != TYPE_CONTINUATION {
                        // RFC 9113 §6.10: nothing may come between HEADERS and its
                        // CONTINUATION frames. Step aside; the server will say so.
                        self.bail(out);
                        continue;
                    }
                    if !is_header {
                        out.extend_from_slice(&rest[..FRAME_HEADER_LEN]);
                        pos += FRAME_HEADER_LEN;
                        self.state = State::Forwarding(len);
                        continue;
                    }
                    if rest.len() < FRAME_HEADER_LEN + len {
                        if len > MAX_BLOCK {
                            self.bail(out);
                            continue;
                        }
                        break;
                    }
                    let frame = rest[..FRAME_HEADER_LEN + len].to_vec();
                    pos += frame.len();
                    self.header_frame(&frame, out);
                }
            }
        }
        input.drain(..pos);
    }

    /// Forwards any buffered raw frames and steps aside.
    fn bail(&mut self, out: &mut Vec<u8>) {
        if let Some(p) = self.pending.take() {
            out.extend_from_slice(&p.raw);
        }
        self.state = State::Passthrough;
    }

    fn header_frame(&mut self, frame: &[u8], out: &mut Vec<u8>) {
        let kind = frame[3];
        let flags = frame[4];
        let stream_id = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[FRAME_HEADER_LEN..];
        if kind == TYPE_HEADERS {
            let mut start = 0;
            let mut end = payload.len();
            if flags & FLAG_PADDED != 0 {
                let Some(&pad) = payload.first() else {
                    out.extend_from_slice(frame);
                    self.state = State::Passthrough;
                    return;
                };
                start = 1;
                end = match end.checked_sub(pad as usize) {
                    Some(e) => e,
                    None => {
                        out.extend_from_slice(frame);
                        self.state = State::Passthrough;
                        return;
                    }
                };
            }
            let mut priority = None;
            if flags & FLAG_PRIORITY != 0 {
                match payload.get(start..start + 5) {
                    Some(p) if start + 5 <= end => {
                        let mut b = [0u8; 5];
                        b.copy_from_slice(p);
                        priority = Some(b);
                        start += 5;
                    }
                    _ => {
                        out.extend_from_slice(frame);
                        self.state = State::Passthrough;
                        return;
                    }
                }
            }
            self.pending = Some(PendingBlock {
                stream_id,
                flags,
                priority,
                fragment: payload[start..end].to_vec(),
                raw: frame.to_vec(),
            });
        } else {
            match &mut self.pending {
                Some(p)
                    if p.stream_id == stream_id
                        && p.fragment.len() + payload.len() <= MAX_BLOCK =>
                {
                    p.fragment.extend_from_slice(payload);
                    p.raw.extend_from_slice(frame);
                }
                _ => {
                    self.bail(out);
                    out.extend_from_slice(frame);
                    return;
                }
            }
        }
        if flags & FLAG_END_HEADERS != 0
            && let Some(block) = self.pending.take()
        {
            self.finish_block(block, out);
        }
    }

    fn finish_block(&mut self, block: PendingBlock, out: &mut Vec<u8>) {
        let mut headers = match self.decoder.decode(&block.fragment) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(error = %e, "HPACK decoding failed; the shim steps aside");
                out.extend_from_slice(&block.raw);
                self.state = State::Passthrough;
                return;
            }
        };
        for h in &mut headers {
            if h.name == b":authority" && !authority_is_valid(&h.value) {
                tracing::debug!(
                    authority = %String::from_utf8_lossy(&h.value),
                    "replacing an :authority that h2 would refuse"
                );
                *h = Header {
                    name: h.name.clone(),
                    value: REPLACEMENT_AUTHORITY.as_bytes().to_vec(),
                    sensitive: h.sensitive,
                };
                self.rewritten += 1;
            }
        }
        let mut encoded = Vec::new();
        hpack::encode_literal_block(&headers, &mut encoded);
        write_header_frames(&block, &encoded, out);
    }
}

fn write_header_frames(block: &PendingBlock, encoded: &[u8], out: &mut Vec<u8>) {
    let prio_len = if block.priority.is_some() { 5 } else { 0 };
    let first_room = SAFE_FRAME_SIZE - prio_len;
    let (first, mut rest) = encoded.split_at(encoded.len().min(first_room));
    let mut flags = block.flags & (FLAG_END_STREAM | FLAG_PRIORITY);
    if rest.is_empty() {
        flags |= FLAG_END_HEADERS;
    }
    frame_header(
        first.len() + prio_len,
        TYPE_HEADERS,
        flags,
        block.stream_id,
        out,
    );
    if let Some(p) = block.priority {
        out.extend_from_slice(&p);
    }
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(SAFE_FRAME_SIZE));
        let flags = if tail.is_empty() { FLAG_END_HEADERS } else { 0 };
        frame_header(chunk.len(), TYPE_CONTINUATION, flags, block.stream_id, out);
        out.extend_from_slice(chunk);
        rest = tail;
    }
}

/// Appends an HTTP/2 frame header (RFC 9113 §4.1).
pub fn frame_header(len: usize, kind: u8, flags: u8, stream_id: u32, out: &mut Vec<u8>) {
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
}

/// Puts the shim between an accepted connection and the server: returns the stream to hand
/// to tonic; two tasks pump bytes until either side closes.
pub fn wrap<S>(client: S) -> DuplexStream
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (server_side, shim_side) = tokio::io::duplex(64 * 1024);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut server_read, mut server_write) = tokio::io::split(shim_side);
    tokio::spawn(async move {
        let mut rewriter = AuthorityRewriter::default();
        let mut input = Vec::with_capacity(16 * 1024);
        let mut out = Vec::with_capacity(16 * 1024);
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            input.extend_from_slice(&chunk[..n]);
            rewriter.feed(&mut input, &mut out);
            if server_write.write_all(&out).await.is_err() {
                break;
            }
            out.clear();
        }
        let _ = server_write.shutdown().await;
    });
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    server_side
}

#[cfg(test)]
mod tests;
