//! An SSE reader of an upstream's response body: bytes in, events out
//! (the `id:` and the `data:` lines of each; comments, `event:` and
//! `retry:` are read past).

use bytes::{Buf, Bytes, BytesMut};

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// Its `id:`, if it had one.
    pub(crate) id: Option<String>,
    /// Its `data:` lines joined by `\n` (a JSON-RPC message).
    pub(crate) data: Bytes,
}

/// What is buffered of an event stream.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    buf: BytesMut,
    id: Option<String>,
    data: Vec<u8>,
    has_data: bool,
}

/// The longest line the reader keeps (a message of 16 MiB).
const MAX_LINE: usize = 16 << 20;

impl Parser {
    /// Adds `chunk` and returns the events it completed. `Err` when a line
    /// grows past 16 MiB.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<Event>, &'static str> {
        let mut out = vec![];
        // The complete lines are read where they stand (in the chunk, or in
        // what was kept of the last one), and only a partial last line is
        // kept: no buffer is split per line.
        let pending = std::mem::take(&mut self.buf);
        let mut joined;
        let bytes: &[u8] = if pending.is_empty() {
            chunk
        } else {
            joined = pending;
            joined.extend_from_slice(chunk);
            &joined
        };
        let mut at = 0;
        while let Some(nl) = memchr::memchr(b'\n', &bytes[at..]) {
            let line = &bytes[at..at + nl];
            at += nl + 1;
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(e) = self.line(line) {
                out.push(e);
            }
        }
        self.buf.extend_from_slice(&bytes[at..]);
        if self.buf.len() > MAX_LINE || self.data.len() > MAX_LINE {
            return Err("an SSE line of the upstream is over 16 MiB");
        }
        Ok(out)
    }

    fn line(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            // An id without data still moves the cursor (as the SSE spec's
            // last event id does): it comes out as an event with no data.
            // The data's own allocation when it fits it exactly (one data
            // line, the usual case): the ring counts what it holds.
            let event = (self.has_data || self.id.is_some()).then(|| Event {
                id: self.id.take(),
                data: gapless::ring::exact_bytes(std::mem::take(&mut self.data)),
            });
            self.has_data = false;
            self.data.clear();
            return event;
        }
        if line[0] == b':' {
            return None;
        }
        let (field, mut value) = match line.iter().position(|&b| b == b':') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &[][..]),
        };
        if value.first() == Some(&b' ') {
            value.advance(1);
        }
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"id" if !value.contains(&0) => self.id = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_across_chunks_with_ids_comments_and_multiline_data() {
        let mut p = Parser::default();
        let mut all = vec![];
        let stream = b": hello\nid: a-1\nevent: message\ndata: {\"x\":\ndata: 1}\n\nid: a-2\r\ndata: {}\r\n\r\ndata: no id\n\n";
        for chunk in stream.chunks(5) {
            all.extend(p.push(chunk).unwrap());
        }
        assert_eq!(
            all,
            [
                Event { id: Some("a-1".into()), data: Bytes::from_static(b"{\"x\":\n1}") },
                Event { id: Some("a-2".into()), data: Bytes::from_static(b"{}") },
                Event { id: None, data: Bytes::from_static(b"no id") },
            ]
        );
    }

    #[test]
    fn an_id_without_data_is_an_event_with_no_data() {
        let mut p = Parser::default();
        let none = |id: &str| Event { id: Some(id.into()), data: Bytes::new() };
        assert_eq!(p.push(b"id: p-0\ndata:\n\n").unwrap(), [none("p-0")]);
        assert_eq!(p.push(b"id: p-1\n\n").unwrap(), [none("p-1")]);
        assert!(p.push(b"\n: c\n\n").unwrap().is_empty());
        assert_eq!(p.push(b"data: x\n\n").unwrap(), [Event { id: None, data: Bytes::from_static(b"x") }]);
    }
}
