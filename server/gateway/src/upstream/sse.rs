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
        // What is kept is one partial line (it holds no newline), so only
        // the new chunk is ever searched, and complete lines are read where
        // they stand: nothing is copied or scanned twice.
        let from = if self.buf.is_empty() {
            0
        } else {
            match memchr::memchr(b'\n', chunk) {
                None => {
                    self.buf.extend_from_slice(chunk);
                    chunk.len()
                }
                Some(i) => {
                    self.buf.extend_from_slice(&chunk[..i]);
                    let line = std::mem::take(&mut self.buf);
                    if let Some(e) = self.line(line.strip_suffix(b"\r").unwrap_or(&line)) {
                        out.push(e);
                    }
                    i + 1
                }
            }
        };
        let mut at = from;
        while let Some(nl) = memchr::memchr(b'\n', &chunk[at..]) {
            let line = &chunk[at..at + nl];
            at += nl + 1;
            if let Some(e) = self.line(line.strip_suffix(b"\r").unwrap_or(line)) {
                out.push(e);
            }
        }
        if at < chunk.len() {
            self.buf.extend_from_slice(&chunk[at..]);
        }
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
    fn a_line_in_many_chunks_and_a_crlf_split_between_two() {
        let mut p = Parser::default();
        let long = format!("data: {}", "x".repeat(100_000));
        let mut all = vec![];
        for b in long.as_bytes().chunks(7) {
            all.extend(p.push(b).unwrap());
        }
        all.extend(p.push(b"\r").unwrap());
        all.extend(p.push(b"\n\r").unwrap());
        all.extend(p.push(b"\ndata: y\n\n").unwrap());
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].data.len(), 100_000);
        assert_eq!(all[1].data, Bytes::from_static(b"y"));
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
