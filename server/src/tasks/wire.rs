//! A task as the wire has it (`Task`, `DetailedTask`), and its timestamps.

use crate::backend::task_store::{Record, Status};
use crate::vocab::jsonrpc::code;
pub(crate) use crate::vocab::time::now_ms;
use serde_json::{json, Map, Value};

/// `ms` (Unix) as ISO 8601 in UTC with milliseconds:
/// `2026-12-02T15:42:41.123Z`.
pub(crate) fn iso8601(ms: u64) -> String {
    let (secs, milli) = (ms / 1000, ms % 1000);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days to a civil date (proleptic Gregorian; H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A task's fields as the wire has them (`Task`), with the status's own
/// payload (`inputRequests`, `result`, `error`) when `detailed`
/// (`tasks/get`, a `DetailedTask`). A key without a value is left out,
/// `ttlMs` but: it is `null` for a task kept without a TTL.
pub(crate) fn wire(r: &Record, detailed: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("taskId".into(), json!(r.id));
    m.insert("status".into(), json!(r.status.as_str()));
    if let Some(s) = &r.status_message {
        m.insert("statusMessage".into(), json!(s));
    }
    m.insert("createdAt".into(), json!(iso8601(r.created_at_ms)));
    m.insert("lastUpdatedAt".into(), json!(iso8601(r.updated_at_ms)));
    m.insert("ttlMs".into(), r.ttl_ms.map_or(Value::Null, |t| json!(t)));
    if let Some(p) = r.poll_interval_ms {
        m.insert("pollIntervalMs".into(), json!(p));
    }
    if detailed {
        match r.status {
            Status::InputRequired => {
                drop(m.insert("inputRequests".into(), Value::Object(r.input_requests.clone())))
            }
            Status::Completed => drop(m.insert("result".into(), r.result.clone().unwrap_or(json!({})))),
            Status::Failed => drop(m.insert(
                "error".into(),
                r.error.clone().unwrap_or(json!({"code": code::INTERNAL_ERROR, "message": "failed"})),
            )),
            Status::Working | Status::Cancelled => {}
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_796_226_161_123), "2026-12-02T15:42:41.123Z");
        assert_eq!(iso8601(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
    }
}
