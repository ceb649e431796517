//! Redis's answers decoded: a script's items, strings, numbers, hex
//! nonces and namespaces, and the events of an `XRANGE` of a session's log.

use crate::error::StoreError;
use crate::model::StoredEvent;
use bytes::Bytes;
use gapless::{Namespace, Seq, StreamId};
use redis::Value;

/// A script's answer as its items, status first; `corrupt` (a key of
/// another type) as [`StoreError::Corrupt`].
pub(crate) fn script_items(v: Value) -> Result<Vec<Value>, StoreError> {
    let items = match v {
        Value::Array(items) => items,
        other => return Err(StoreError::Protocol(format!("a script answered {other:?}"))),
    };
    match items.first().map(text) {
        Some(Ok(s)) if s == "corrupt" => {
            Err(StoreError::Corrupt { key: items.get(1).map(text).transpose()?.unwrap_or_default() })
        }
        Some(Ok(_)) => Ok(items),
        _ => Err(StoreError::Protocol("a script answered without a status".into())),
    }
}

/// The events of one `XRANGE` reply of a session's log, in log order
/// (control entries, `<seq>-<k>` with `k >= 1`, are left out).
pub(crate) fn log_events(v: &Value) -> Result<Vec<StoredEvent>, StoreError> {
    let Value::Array(entries) = v else {
        return Err(StoreError::Protocol(format!("XRANGE answered {v:?}")));
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(pair) = entry else {
            return Err(StoreError::Protocol("a log entry is not a pair".into()));
        };
        let [id, Value::Array(fields)] = &pair[..] else {
            return Err(StoreError::Protocol("a log entry is not an id and fields".into()));
        };
        let id = text(id)?;
        let Some((seq, "0")) = id.split_once('-') else { continue };
        let (mut stream, mut index, mut check, mut payload) = (None, None, None, None);
        for kv in fields.chunks(2) {
            let [k, v] = kv else { return Err(StoreError::Protocol("ragged log entry".into())) };
            match text(k)?.as_str() {
                "s" => stream = Some(int(Some(v))?),
                "i" => index = Some(int(Some(v))?),
                "n" => check = Some(hex(Some(v))?),
                "p" => {
                    payload = Some(match v {
                        Value::BulkString(b) => Bytes::from(b.clone()),
                        other => {
                            return Err(StoreError::Protocol(format!("expected a payload, got {other:?}")))
                        }
                    })
                }
                _ => {}
            }
        }
        let (Some(stream), Some(index), Some(check), Some(payload)) = (stream, index, check, payload) else {
            return Err(StoreError::Protocol(format!("log entry {id} lacks a field")));
        };
        out.push(StoredEvent {
            seq: Seq(seq.parse().map_err(|_| StoreError::Protocol(format!("log entry id {id}")))?),
            stream: StreamId(stream),
            index_in_stream: index,
            check,
            payload,
        });
    }
    Ok(out)
}

/// A script reply's string.
pub(crate) fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => {
            String::from_utf8(b.clone()).map_err(|_| StoreError::Protocol("non-UTF-8 status".into()))
        }
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Okay => Ok("OK".into()),
        Value::Nil => Ok(String::new()),
        other => Err(StoreError::Protocol(format!("expected a string, got {other:?}"))),
    }
}

/// A script reply's non-negative integer.
pub(crate) fn int(v: Option<&Value>) -> Result<u64, StoreError> {
    match v {
        Some(Value::Int(i)) if *i >= 0 => Ok(*i as u64),
        Some(Value::BulkString(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| StoreError::Protocol("expected a number".into())),
        other => Err(StoreError::Protocol(format!("expected a number, got {other:?}"))),
    }
}

/// A 16-hex-digit namespace or nonce.
pub(crate) fn hex(v: Option<&Value>) -> Result<u64, StoreError> {
    let s = text(v.ok_or_else(|| StoreError::Protocol("missing hex field".into()))?)?;
    if s.len() != 16 {
        return Err(StoreError::Protocol(format!("expected 16 hex digits, got {s:?}")));
    }
    u64::from_str_radix(&s, 16)
        .map_err(|_| StoreError::Protocol(format!("expected 16 hex digits, got {s:?}")))
}

/// A nonce, or `None` for an empty string.
pub(crate) fn opt_hex(v: Option<&Value>) -> Result<Option<u64>, StoreError> {
    match v.map(text).transpose()? {
        Some(s) if !s.is_empty() => hex(v).map(Some),
        _ => Ok(None),
    }
}

pub(crate) fn namespace(v: Option<&Value>) -> Result<Namespace, StoreError> {
    hex(v).map(Namespace)
}
