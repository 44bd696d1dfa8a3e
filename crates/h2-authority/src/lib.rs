//! The HTTP/2 `:authority` workaround in front of a tonic server on a unix socket.
//!
//! The kubelet's plugin-registration client (grpc-go) sends the socket path it dialled,
//! percent-encoded, as the HTTP/2 `:authority`; the `http` crate refuses `%` there, so
//! `h2` resets the stream with PROTOCOL_ERROR and the kubelet never registers the plugin.
//! [`wrap`] sits between the accepted connection and tonic and replaces only such an
//! authority (`shim`, on the small HPACK codec in `hpack`).
//!
//! **Removable in one line.** The upstream fix is hyperium/h2 PR 487 (the grpc-rust
//! issues 243 and 1876 track the same refusal). Once the `h2` in the tree accepts a
//! percent-encoded `:authority`, delete the `.map(|conn| conn.map(topoalign_h2_authority::wrap))`
//! in `topoalign_kubelet_plugin::server` (its `incoming` closure) and this crate with it.
//! The shim already stops changing anything the day `http` accepts such authorities:
//! its validity test is `http`'s own parser.

mod hpack;
mod shim;

pub use hpack::{Decoder, Encoder, Header};
pub use shim::frame_header;
pub use shim::{AuthorityRewriter, PREFACE, REPLACEMENT_AUTHORITY, authority_is_valid, wrap};
