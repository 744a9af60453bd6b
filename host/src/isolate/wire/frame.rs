//! Framing: the length prefix and its bound, the frame kinds, the errors,
//! the field writer ([`Frame`]) and reader ([`Dec`]) the codecs build on,
//! and reading and writing whole frames on a stream.

use abi_stable::std_types::RString;
use std::io::{self, Read, Write};

/// The wire version the child announces in its hello.
pub(crate) const WIRE_VERSION: u8 = 1;

/// The largest frame either side accepts (checked before allocating).
pub(crate) const MAX_FRAME: u32 = 64 << 20;

/// Frame kinds.
pub(super) mod kind {
    pub(in crate::isolate::wire) const HELLO: u8 = 1;
    pub(in crate::isolate::wire) const FAILED: u8 = 2;
    pub(in crate::isolate::wire) const CALL: u8 = 3;
    pub(in crate::isolate::wire) const REPLY: u8 = 4;
    pub(in crate::isolate::wire) const EXPORT: u8 = 5;
    pub(in crate::isolate::wire) const STATE: u8 = 6;
    pub(in crate::isolate::wire) const IMPORT: u8 = 7;
    pub(in crate::isolate::wire) const IMPORTED: u8 = 8;
    pub(in crate::isolate::wire) const SHUTDOWN: u8 = 9;
    pub(in crate::isolate::wire) const STATE_OP: u8 = 10;
    pub(in crate::isolate::wire) const STATE_ANSWER: u8 = 11;
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WireError {
    /// The frame ended before a field did.
    #[error("truncated frame")]
    Truncated,
    /// A frame longer than [`MAX_FRAME`], or empty.
    #[error("frame length {0} out of bounds")]
    Length(u64),
    /// A string that is not UTF-8.
    #[error("a string is not UTF-8")]
    Utf8,
    /// A frame kind this side does not know (or did not expect here).
    #[error("unexpected frame kind {0}")]
    Kind(u8),
    /// A field that cannot be what it says (a flag other than 0/1, …).
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    /// Bytes left over after the message.
    #[error("trailing bytes after the message")]
    Trailing,
}

/// Builds one frame in a reusable buffer.
pub(super) struct Frame<'b> {
    buf: &'b mut Vec<u8>,
}

impl<'b> Frame<'b> {
    pub(super) fn start(buf: &'b mut Vec<u8>, kind: u8) -> Self {
        buf.clear();
        buf.extend_from_slice(&[0, 0, 0, 0, kind]);
        Frame { buf }
    }

    pub(super) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub(super) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    pub(super) fn str(&mut self, s: &str) {
        self.len(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// A presence flag, then `v` written by `write` when there is one.
    pub(super) fn opt<T>(&mut self, v: Option<T>, write: impl FnOnce(&mut Self, T)) {
        match v {
            Some(v) => {
                self.u8(1);
                write(self, v);
            }
            None => self.u8(0),
        }
    }

    pub(super) fn opt_str(&mut self, s: Option<&str>) {
        self.opt(s, Self::str);
    }

    /// Writes the length prefix; the frame is ready to send.
    pub(super) fn finish(self) -> &'b [u8] {
        let len = u32::try_from(self.buf.len() - 4).unwrap_or(u32::MAX);
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.buf
    }
}

/// Reads fields of one frame's payload.
pub(super) struct Dec<'a> {
    buf: &'a [u8],
}

impl<'a> Dec<'a> {
    /// Splits a frame (kind and payload, without the length) into its kind
    /// and a reader of its payload.
    pub(super) fn open(frame: &'a [u8]) -> Result<(u8, Self), WireError> {
        let (&k, payload) = frame.split_first().ok_or(WireError::Truncated)?;
        Ok((k, Dec { buf: payload }))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.buf.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(super) fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    pub(super) fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub(super) fn flag(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Malformed("a presence flag is not 0 or 1")),
        }
    }

    /// A count of elements each at least `min` bytes long: never more than
    /// the bytes left allow, so a hostile count allocates nothing.
    fn count(&mut self, min: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.buf.len() {
            return Err(WireError::Truncated);
        }
        Ok(n)
    }

    /// A counted list of elements each at least `min` bytes long (see
    /// [`Self::count`]), each read by `read`.
    pub(super) fn list<T>(
        &mut self,
        min: usize,
        mut read: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        let n = self.count(min)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(read(self)?);
        }
        Ok(items)
    }

    /// A presence flag, then what `read` reads when it is set.
    pub(super) fn opt<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, WireError>,
    ) -> Result<Option<T>, WireError> {
        if self.flag()? {
            read(self).map(Some)
        } else {
            Ok(None)
        }
    }

    pub(super) fn str(&mut self) -> Result<String, WireError> {
        let n = self.u32()? as usize;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| WireError::Utf8)
    }

    pub(super) fn rstr(&mut self) -> Result<RString, WireError> {
        self.str().map(RString::from)
    }

    pub(super) fn opt_str(&mut self) -> Result<Option<String>, WireError> {
        self.opt(Self::str)
    }

    pub(super) fn end(&self) -> Result<(), WireError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(WireError::Trailing)
        }
    }
}

/// Why reading a frame failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The socket failed, timed out, or closed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The length prefix is out of bounds.
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// Reads one frame (kind and payload) into `buf`. The length is checked
/// against [`MAX_FRAME`] before anything is allocated.
pub(crate) fn read_frame(reader: &mut impl Read, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    let mut len = [0; 4];
    reader.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len);
    if len == 0 || len > MAX_FRAME {
        return Err(WireError::Length(u64::from(len)).into());
    }
    buf.clear();
    buf.resize(len as usize, 0);
    reader.read_exact(buf)?;
    Ok(())
}

/// Sends a frame built by one of the encoders.
pub(crate) fn write_frame(writer: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    if frame.len() - 4 > MAX_FRAME as usize {
        return Err(io::Error::other("frame too large for the pack host wire"));
    }
    writer.write_all(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_prefix_beyond_the_cap_is_refused_before_allocating() {
        let mut bytes = (MAX_FRAME + 1).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[kind::REPLY; 16]);
        let mut buf = Vec::new();
        let error = read_frame(&mut bytes.as_slice(), &mut buf).unwrap_err();
        assert!(matches!(error, ReadError::Wire(WireError::Length(_))));
        assert!(buf.capacity() < 1024);
        let zero = 0u32.to_le_bytes();
        assert!(read_frame(&mut zero.as_slice(), &mut buf).is_err());
        // A frame cut short by the peer is an I/O error (EOF).
        let mut short = 10u32.to_le_bytes().to_vec();
        short.push(kind::REPLY);
        assert!(matches!(
            read_frame(&mut short.as_slice(), &mut buf).unwrap_err(),
            ReadError::Io(_)
        ));
    }
}
