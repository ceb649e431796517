//! `gapless-load latency`: publish → client-read latency over SSE, from one
//! process. S sessions are initialized on one server (`--addr`), and each
//! one's standalone `GET` stream is opened on another (`--read-addr`: a
//! second cluster node; the same server by default). Each session then calls
//! `emit_events` with `stamp: true` (`docs/SPEC.md` §5.1) and `interval_ms`
//! I, its start staggered over the first interval so that the aggregate rate
//! is steady (S × 1000 / I events a second). For every event the client
//! reads, it records its wall clock minus the event's stamp. The server and
//! the client share the machine's clock.
//!
//! A line protocol like `drive`'s lets the caller read the server between
//! the steps: the tool opens the sessions and prints `sessions`; on a line
//! from stdin it opens their streams and prints `open`; on a second line it
//! opens the calls' connections and prints `ready`; on a third it runs, and
//! prints
//! `done <seconds> <client CPU seconds> <events> <p50 µs> <p99 µs> <p99.9 µs> <max µs>`.
//! Every stream must carry seq 1..N in order; a hole, a duplicate or an
//! error exits non-zero.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use memchr::memmem;

use super::{event_seq, read_rpc_response, self_cpu_secs, Conn, Result, Session, SseReader, Tally};

pub(crate) struct LatencyOpts {
    pub addr: SocketAddr,
    pub read_addr: SocketAddr,
    pub sessions: usize,
    pub count: u64,
    pub interval_ms: u64,
    pub payload: u64,
    /// Each call's connection opened when the call starts and closed once
    /// its response head arrives (the call goes on: a 2025 session's
    /// request stream is resumable, so its close does not cancel it): one
    /// descriptor per session instead of two, for 10 000 sessions.
    pub detach: bool,
    /// Events published in the run's first `warmup_ms` are read and checked
    /// but left out of the latencies (the calls' starts are spread over the
    /// first interval, and with `detach` they connect then).
    pub warmup_ms: u64,
}

pub(crate) fn usage() -> ! {
    eprintln!(
        "usage: gapless-load latency --addr HOST:PORT [--read-addr HOST:PORT] --sessions S --count N
                          --interval-ms I [--payload B] [--detach] [--warmup-ms W]
  S sessions (default 1) initialized at --addr, each with its standalone GET at
  --read-addr (default --addr), each emitting N stamped events (default 1000) of
  B payload bytes (default 64) I ms apart (default 10); prints `sessions`,
  `open` and `ready` and waits for a line on stdin after each, then prints
  `done <seconds> <client CPU seconds> <events> <p50> <p99> <p99.9> <max>` (µs).
  --detach: each call's connection opens when the call starts and closes once
  its response head is in (the call goes on), so that a session holds one
  descriptor, its stream's, and 10 000 fit the open-file limit. --warmup-ms W:
  events published in the run's first W ms are checked but not timed
  (default 0)"
    );
    std::process::exit(2)
}

pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> LatencyOpts {
    let mut o = LatencyOpts {
        addr: ([127, 0, 0, 1], 0).into(),
        read_addr: ([127, 0, 0, 1], 0).into(),
        sessions: 1,
        count: 1000,
        interval_ms: 10,
        payload: 64,
        detach: false,
        warmup_ms: 0,
    };
    let (mut addr, mut read_addr) = (None, None);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--addr" => addr = Some(v().parse().unwrap_or_else(|_| usage())),
            "--read-addr" => read_addr = Some(v().parse().unwrap_or_else(|_| usage())),
            "--sessions" => o.sessions = v().parse().unwrap_or_else(|_| usage()),
            "--count" => o.count = v().parse().unwrap_or_else(|_| usage()),
            "--interval-ms" => o.interval_ms = v().parse().unwrap_or_else(|_| usage()),
            "--payload" => o.payload = v().parse().unwrap_or_else(|_| usage()),
            "--detach" => o.detach = true,
            "--warmup-ms" => o.warmup_ms = v().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    o.addr = addr.unwrap_or_else(|| usage());
    o.read_addr = read_addr.unwrap_or(o.addr);
    if o.sessions == 0 || o.count == 0 || o.interval_ms == 0 {
        usage()
    }
    o
}

fn unix_micros() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

static STAMP: std::sync::LazyLock<memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memmem::Finder::new(b"\"t\":"));

/// `data.t` of a stamped event.
fn event_stamp(data: &[u8]) -> Option<u64> {
    let i = STAMP.find(data)? + 4;
    let digits = &data[i..];
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&digits[..n]).ok()?.parse().ok()
}

/// Reads `r` until seq `count`: the latency in µs of every event published
/// at `since` (unix µs) or later.
async fn read(mut r: SseReader, count: u64, since: u64) -> Result<Vec<u32>> {
    let mut t = Tally::new();
    let mut lat = Vec::with_capacity(count as usize);
    loop {
        let Some(ev) = r.next_timeout(Duration::from_secs(30)).await? else {
            return Err(format!("stream ended at seq {} of {count}", t.next - 1).into());
        };
        let Some(seq) = event_seq(&ev.data) else { continue };
        let now = unix_micros();
        let at = event_stamp(&ev.data).ok_or("an event without its stamp")?;
        if at >= since {
            lat.push(now.saturating_sub(at).min(u32::MAX as u64) as u32);
        }
        t.see(seq);
        if seq == count {
            break;
        }
    }
    if t.in_order != count || t.holes != 0 || t.dups_or_reorder != 0 {
        return Err(format!(
            "{} of {count} events in order ({} missing, {} out of order)",
            t.in_order, t.holes, t.dups_or_reorder
        )
        .into());
    }
    Ok(lat)
}

/// [`emit_once`], its error told at once (a reader waiting for the events
/// of a call that failed would otherwise only time out).
async fn emit(c: Conn, id: String, o: (u64, u64, u64), delay: Duration) -> Result<String> {
    let r = emit_once(c, &id, o, delay).await;
    if let Err(e) = &r {
        eprintln!("session {id}: emit_events: {e}");
    }
    r.map(|()| id)
}

/// One `emit_events` call of session `id` on `c`, after `delay`.
async fn emit_once(mut c: Conn, id: &str, o: (u64, u64, u64), delay: Duration) -> Result<()> {
    let (count, interval, payload) = o;
    tokio::time::sleep(delay).await;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"emit_events","arguments":{{"count":{count},"interval_ms":{interval},"payload_bytes":{payload},"target":"standalone","stamp":true}}}}}}"#
    );
    let resp = c.post(Some(id), body).await?;
    let timeout = Duration::from_millis(count * interval) + Duration::from_secs(60);
    let v = read_rpc_response(resp, timeout).await?;
    if v.get("result").is_none() {
        return Err(format!("emit_events failed: {v}").into());
    }
    Ok(())
}

/// One `emit_events` call of session `id` at `addr`, after `delay`, on a
/// connection of its own that closes once the response head is in: the
/// call goes on, and its events are read on the session's stream.
async fn emit_detached(addr: SocketAddr, id: String, o: (u64, u64, u64), delay: Duration) -> Result<String> {
    let (count, interval, payload) = o;
    tokio::time::sleep(delay).await;
    let mut c = Conn::open(addr).await?;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"emit_events","arguments":{{"count":{count},"interval_ms":{interval},"payload_bytes":{payload},"target":"standalone","stamp":true}}}}}}"#
    );
    let resp = c.post(Some(&id), body).await;
    match resp {
        Ok(r) if r.status() == hyper::StatusCode::OK => Ok(id),
        Ok(r) => {
            let e = format!("session {id}: emit_events answered {}", r.status());
            eprintln!("{e}");
            Err(e.into())
        }
        Err(e) => {
            eprintln!("session {id}: emit_events: {e}");
            Err(e)
        }
    }
}

/// Deletes session `id` (best effort).
async fn delete(addr: SocketAddr, id: &str) {
    let Ok(mut c) = Conn::open(addr).await else { return };
    if let Ok(req) = c.request("DELETE", Some(id)).body(http_body_util::Full::new(bytes::Bytes::new())) {
        if let Ok(Ok(resp)) = tokio::time::timeout(Duration::from_secs(5), c.send(req)).await {
            let _ = http_body_util::BodyExt::collect(resp.into_body()).await;
        }
    }
}

/// Opens `n` sessions at `addr`, 64 at a time; their ids. The connections
/// that initialized them close: each session holds one connection for its
/// stream and one for its call, and no more (a process may have 20 000
/// descriptors on this machine).
async fn open_sessions(addr: SocketAddr, n: usize) -> Result<Vec<String>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let batch: Vec<_> = (0..(n - out.len()).min(64)).map(|_| tokio::spawn(Session::open(addr))).collect();
        for b in batch {
            out.push(b.await??.id.clone());
        }
    }
    Ok(out)
}

fn pct(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

pub(crate) async fn run(o: LatencyOpts) -> Result<()> {
    let sessions = open_sessions(o.addr, o.sessions).await?;
    // A pause for the caller to read the server's memory with sessions but
    // no stream: `sessions`, then a line on stdin.
    println!("sessions");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let mut readers = Vec::with_capacity(o.sessions);
    let mut conns = Vec::with_capacity(o.sessions);
    // 64 at a time.
    for chunk in sessions.chunks(64) {
        let opening: Vec<_> = chunk
            .iter()
            .map(|s| {
                let (addr, id) = (o.read_addr, s.clone());
                tokio::spawn(async move {
                    let mut c = Conn::open(addr).await?;
                    let r = c.get_stream(&id, None).await?;
                    Ok::<_, super::BoxError>((c, r))
                })
            })
            .collect();
        for t in opening {
            let (c, r) = t.await??;
            conns.push(c);
            readers.push(r);
        }
    }
    // A pause for the caller to read the server's memory with every stream
    // open and no other connection: `open`, then a line on stdin.
    println!("open");
    std::io::stdout().flush()?;
    line.clear();
    std::io::stdin().lock().read_line(&mut line)?;
    // The calls' connections, opened before the clock starts (64 at a time),
    // unless each call opens its own (`--detach`).
    let mut posts = Vec::with_capacity(o.sessions);
    if !o.detach {
        for chunk in sessions.chunks(64) {
            let opening: Vec<_> = chunk.iter().map(|_| tokio::spawn(Conn::open(o.addr))).collect();
            for t in opening {
                posts.push(t.await??);
            }
        }
    }
    println!("ready");
    std::io::stdout().flush()?;
    line.clear();
    std::io::stdin().lock().read_line(&mut line)?;
    let (c0, t0) = (self_cpu_secs(), Instant::now());
    let since = unix_micros() + o.warmup_ms * 1000;
    let reads: Vec<_> = readers.into_iter().map(|r| tokio::spawn(read(r, o.count, since))).collect();
    let n = o.sessions as u64;
    let shape = (o.count, o.interval_ms, o.payload);
    // The calls' starts are spread over one interval; detached ones, which
    // each connect, over a second at least (10 000 connections in 100 ms
    // outrun the server's close of those the client dropped, and its
    // connection cap answers 503).
    let spread = if o.detach { o.interval_ms.max(1000) } else { o.interval_ms };
    let delay = |k: usize| Duration::from_micros(spread * 1000 * k as u64 / n);
    let emits: Vec<_> = if o.detach {
        let addr = o.addr;
        sessions
            .into_iter()
            .enumerate()
            .map(|(k, s)| tokio::spawn(emit_detached(addr, s, shape, delay(k))))
            .collect()
    } else {
        sessions
            .into_iter()
            .zip(posts)
            .enumerate()
            .map(|(k, (s, c))| tokio::spawn(emit(c, s, shape, delay(k))))
            .collect()
    };
    let mut all = Vec::with_capacity((o.count * n) as usize);
    for r in reads {
        all.extend(r.await??);
    }
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), self_cpu_secs() - c0);
    let mut done = Vec::with_capacity(emits.len());
    for e in emits {
        done.push(e.await??);
    }
    all.sort_unstable();
    println!(
        "done {wall:.6} {cpu:.6} {} {} {} {} {}",
        o.count * n,
        pct(&all, 0.50),
        pct(&all, 0.99),
        pct(&all, 0.999),
        all.last().copied().unwrap_or(0)
    );
    std::io::stdout().flush()?;
    drop(conns);
    for id in done {
        delete(o.addr, &id).await;
    }
    Ok(())
}
