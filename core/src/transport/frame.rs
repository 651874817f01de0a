//! Frames: how a message crosses a connection (byte layout in `docs/wire-format.md`).
//!
//! A frame is a 16-byte header — magic, version, message kind, payload length, CRC-32C
//! of the header's first 12 bytes and the payload — then the payload. The checksum is
//! computed when a frame is built ([`encode_frame`]) and verified before anything of
//! the payload is read ([`FrameHeader::parse`] + [`verify_payload`]): a frame that
//! fails is never decoded, and the connection it came on is closed.
//!
//! Limits: a payload is at most [`MAX_PAYLOAD_BYTES`]; strings and lists inside it
//! are bounded by what remains of the payload (a length that points past the end is a
//! decode error, never an allocation of that size).

use std::fmt;

/// "RNDB", little-endian.
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"RNDB");
/// The frame layout's version; a peer with another version is refused at `Hello`.
pub const FRAME_VERSION: u16 = 1;
pub const FRAME_HEADER_BYTES: usize = 16;
/// Largest payload a frame may carry (16 MiB): a configuration, a batch of rows.
pub const MAX_PAYLOAD_BYTES: usize = 16 << 20;

/// Why bytes are not a valid frame or message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    BadMagic(u32),
    BadVersion(u16),
    TooLarge(usize),
    Checksum {
        expected: u32,
        computed: u32,
    },
    UnknownKind(u16),
    /// The payload ended before a field (what was being read).
    Truncated(&'static str),
    /// Bytes left over after the last field of a message.
    Trailing(usize),
    BadValue(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::BadMagic(m) => write!(f, "not an rndb frame (magic {m:#010x})"),
            WireError::BadVersion(v) => {
                write!(f, "frame version {v}, this node speaks {FRAME_VERSION}")
            }
            WireError::TooLarge(n) => {
                write!(f, "payload of {n} bytes (at most {MAX_PAYLOAD_BYTES})")
            }
            WireError::Checksum { expected, computed } => write!(
                f,
                "frame checksum mismatch (frame says {expected:#010x}, computed {computed:#010x})"
            ),
            WireError::UnknownKind(k) => write!(f, "unknown message kind {k}"),
            WireError::Truncated(what) => write!(f, "message ends before its {what}"),
            WireError::Trailing(n) => write!(f, "{n} bytes after the message's last field"),
            WireError::BadValue(what) => write!(f, "invalid {what}"),
        }
    }
}

impl std::error::Error for WireError {}

/// A frame's header, parsed and checked (but for the payload's checksum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: u16,
    pub payload_len: usize,
    pub crc: u32,
}

impl FrameHeader {
    pub fn parse(h: &[u8; FRAME_HEADER_BYTES]) -> Result<FrameHeader, WireError> {
        let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        if magic != FRAME_MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        let version = u16::from_le_bytes([h[4], h[5]]);
        if version != FRAME_VERSION {
            return Err(WireError::BadVersion(version));
        }
        let kind = u16::from_le_bytes([h[6], h[7]]);
        let payload_len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
        if payload_len > MAX_PAYLOAD_BYTES {
            return Err(WireError::TooLarge(payload_len));
        }
        let crc = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        Ok(FrameHeader {
            kind,
            payload_len,
            crc,
        })
    }
}

/// Checks the payload read after `header` against the header's checksum.
pub fn verify_payload(
    header_bytes: &[u8; FRAME_HEADER_BYTES],
    header: &FrameHeader,
    payload: &[u8],
) -> Result<(), WireError> {
    let computed = frame_crc(&header_bytes[..12], payload);
    if computed != header.crc {
        return Err(WireError::Checksum {
            expected: header.crc,
            computed,
        });
    }
    Ok(())
}

fn frame_crc(head12: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(head12), payload)
}

/// Appends one frame of `kind` whose payload `body` writes; the header's length and
/// checksum are filled in after it. Fails (appending nothing) when the payload would
/// exceed [`MAX_PAYLOAD_BYTES`].
pub fn encode_frame(
    out: &mut Vec<u8>,
    kind: u16,
    body: impl FnOnce(&mut Enc<'_>),
) -> Result<(), WireError> {
    let start = out.len();
    out.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    out.extend_from_slice(&FRAME_VERSION.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&[0u8; 8]);
    body(&mut Enc { out });
    let len = out.len() - start - FRAME_HEADER_BYTES;
    if len > MAX_PAYLOAD_BYTES {
        out.truncate(start);
        return Err(WireError::TooLarge(len));
    }
    out[start + 8..start + 12].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = frame_crc(&out[start..start + 12], &out[start + FRAME_HEADER_BYTES..]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Writes the fields of a payload (little-endian; see `docs/wire-format.md`).
pub struct Enc<'a> {
    out: &'a mut Vec<u8>,
}

impl Enc<'_> {
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub fn bool(&mut self, v: bool) {
        self.out.push(v as u8);
    }
    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    /// A string: u32 byte length, then UTF-8.
    pub fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.out.extend_from_slice(s.as_bytes());
    }
    /// Bytes as they are (a body encoded elsewhere; it runs to the payload's end).
    pub fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
    /// A list of u32: u32 count, then the values.
    pub fn u32s(&mut self, v: &[u32]) {
        self.u32(v.len() as u32);
        for &x in v {
            self.u32(x);
        }
    }
}

/// Reads the fields of a payload; every read checks what remains.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Dec<'a> {
        Dec { buf, pos: 0 }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.buf.len() - self.pos < n {
            return Err(WireError::Truncated(what));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, what)?[0])
    }
    pub fn bool(&mut self, what: &'static str) -> Result<bool, WireError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::BadValue(what)),
        }
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub fn str(&mut self, what: &'static str) -> Result<String, WireError> {
        let n = self.u32(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| WireError::BadValue(what))
    }
    pub fn u32s(&mut self, what: &'static str) -> Result<Vec<u32>, WireError> {
        let n = self.u32(what)? as usize;
        if n > (self.buf.len() - self.pos) / 4 {
            return Err(WireError::Truncated(what));
        }
        (0..n).map(|_| self.u32(what)).collect()
    }
    /// The bytes not read yet (all of them taken: `finish` then succeeds).
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }
    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), WireError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(WireError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u16, body: impl FnOnce(&mut Enc<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(&mut out, kind, body).expect("frame");
        out
    }

    fn split(f: &[u8]) -> ([u8; FRAME_HEADER_BYTES], &[u8]) {
        let mut h = [0u8; FRAME_HEADER_BYTES];
        h.copy_from_slice(&f[..FRAME_HEADER_BYTES]);
        (h, &f[FRAME_HEADER_BYTES..])
    }

    #[test]
    fn a_frame_round_trips_and_every_flipped_bit_is_caught() {
        let f = frame(7, |e| {
            e.u32(42);
            e.str("node 2");
            e.u32s(&[1, 2, 3]);
        });
        let (h, p) = split(&f);
        let hdr = FrameHeader::parse(&h).expect("header");
        assert_eq!((hdr.kind, hdr.payload_len), (7, p.len()));
        verify_payload(&h, &hdr, p).expect("checksum");
        let mut d = Dec::new(p);
        assert_eq!(d.u32("a").expect("u32"), 42);
        assert_eq!(d.str("b").expect("str"), "node 2");
        assert_eq!(d.u32s("c").expect("list"), vec![1, 2, 3]);
        d.finish().expect("all read");
        for bit in 0..f.len() * 8 {
            let mut g = f.clone();
            g[bit / 8] ^= 1 << (bit % 8);
            let (h, p) = split(&g);
            let caught = match FrameHeader::parse(&h) {
                Err(_) => true,
                Ok(hdr) if hdr.payload_len != p.len() => true,
                Ok(hdr) => verify_payload(&h, &hdr, p).is_err(),
            };
            assert!(caught, "bit {bit} flipped unnoticed");
        }
    }

    #[test]
    fn lengths_past_the_end_are_errors_not_allocations() {
        let f = frame(1, |e| e.u32(u32::MAX));
        let (_, p) = split(&f);
        assert_eq!(Dec::new(p).str("name"), Err(WireError::Truncated("name")));
        assert_eq!(
            Dec::new(p).u32s("members"),
            Err(WireError::Truncated("members"))
        );
        let mut d = Dec::new(&[1, 2]);
        assert!(d.u32("x").is_err());
        let d = Dec::new(&[1]);
        assert_eq!(d.finish(), Err(WireError::Trailing(1)));
    }

    #[test]
    fn oversized_payloads_are_refused_on_both_sides() {
        let mut out = vec![9u8];
        let r = encode_frame(&mut out, 1, |e| {
            for _ in 0..(MAX_PAYLOAD_BYTES / 8 + 1) {
                e.u64(0);
            }
        });
        assert!(matches!(r, Err(WireError::TooLarge(_))));
        assert_eq!(out, vec![9u8], "nothing appended");
        let mut h = [0u8; FRAME_HEADER_BYTES];
        h[..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        h[4..6].copy_from_slice(&FRAME_VERSION.to_le_bytes());
        h[8..12].copy_from_slice(&((MAX_PAYLOAD_BYTES + 1) as u32).to_le_bytes());
        assert!(matches!(
            FrameHeader::parse(&h),
            Err(WireError::TooLarge(_))
        ));
        h[4] = 9;
        assert_eq!(FrameHeader::parse(&h), Err(WireError::BadVersion(9)));
        h[0] = 0;
        assert!(matches!(
            FrameHeader::parse(&h),
            Err(WireError::BadMagic(_))
        ));
    }
}
