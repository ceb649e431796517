//! `gapless-load drive`: the many-stream load of a server that is already
//! running (a cluster node, for `scripts/cluster_cost.sh many`), from one
//! process: S sessions on their own connections, each calling
//! `emit_events` and reading every event of its POST response. It replaces
//! S curl processes, so that a benchmark measures the node and Redis rather
//! than its clients.
//!
//! A line protocol lets the caller read its counters around the measured
//! calls alone: the tool initializes the sessions and makes one warm-up call
//! each, prints `ready`, waits for a line on stdin, makes the measured calls
//! at once, and prints `done <seconds> <client CPU seconds> <events>`. Every
//! event is checked (seq 1, 2, …, N on its stream, then the result); any
//! hole, duplicate or error exits non-zero.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{event_seq, self_cpu_secs, Result, Session, SseReader, Tally};

pub(crate) struct DriveOpts {
    pub addr: SocketAddr,
    pub sessions: usize,
    pub count: u64,
    pub payload: u64,
    pub warmup: u64,
}

pub(crate) fn usage() -> ! {
    eprintln!(
        "usage: gapless-load drive --addr HOST:PORT --sessions S --count N [--payload B] [--warmup W]
  S sessions (default 50) each call emit_events with N events (default 2000) of
  B payload bytes (default 64) at once, reading their POST responses; after one
  warm-up call of W events each (default 100) it prints `ready` and waits for a
  line on stdin, then prints `done <seconds> <client CPU seconds> <events>`"
    );
    std::process::exit(2)
}

pub(crate) fn parse(args: impl Iterator<Item = String>) -> DriveOpts {
    let mut o =
        DriveOpts { addr: ([127, 0, 0, 1], 0).into(), sessions: 50, count: 2000, payload: 64, warmup: 100 };
    let mut addr = None;
    let mut args = args;
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--addr" => addr = Some(v().parse().unwrap_or_else(|_| usage())),
            "--sessions" => o.sessions = v().parse().unwrap_or_else(|_| usage()),
            "--count" => o.count = v().parse().unwrap_or_else(|_| usage()),
            "--payload" => o.payload = v().parse().unwrap_or_else(|_| usage()),
            "--warmup" => o.warmup = v().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    o.addr = addr.unwrap_or_else(|| usage());
    if o.sessions == 0 || o.count == 0 || o.warmup == 0 {
        usage()
    }
    o
}

/// One `emit_events` call on `s`'s POST stream: every event read and
/// checked, then the result.
async fn call(s: &mut Session, count: u64, payload: u64) -> Result<u64> {
    let rid = s.next_id;
    s.next_id += 1;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"emit_events","arguments":{{"count":{count},"payload_bytes":{payload},"target":"request"}}}}}}"#
    );
    let resp = s.post.post(Some(&s.id), body).await?;
    if !resp.status().is_success() {
        bail!("POST returned {}", resp.status());
    }
    let mut r = SseReader::new(resp.into_body());
    let mut t = Tally::new();
    let mut answered = false;
    while let Some(ev) = r.next_timeout(Duration::from_secs(60)).await? {
        if let Some(seq) = event_seq(&ev.data) {
            t.see(seq);
        } else if memchr::memmem::find(&ev.data, b"\"result\"").is_some() {
            answered = true;
        } else if !ev.data.is_empty() {
            bail!("session {}: {}", s.id, String::from_utf8_lossy(&ev.data));
        }
    }
    if !answered || t.in_order != count || t.holes != 0 || t.dups_or_reorder != 0 {
        bail!(
            "session {}: {} of {count} events in order ({} missing, {} out of order), answered {answered}",
            s.id,
            t.in_order,
            t.holes,
            t.dups_or_reorder
        );
    }
    Ok(count)
}

async fn all(sessions: Vec<Session>, count: u64, payload: u64) -> Result<(Vec<Session>, u64)> {
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                let r = call(&mut s, count, payload).await;
                (s, r)
            })
        })
        .collect();
    let (mut back, mut events) = (Vec::new(), 0);
    for t in tasks {
        let (s, r) = t.await?;
        events += r?;
        back.push(s);
    }
    Ok((back, events))
}

pub(crate) async fn run(o: DriveOpts) -> Result<()> {
    let mut sessions = Vec::with_capacity(o.sessions);
    for _ in 0..o.sessions {
        sessions.push(Session::open(o.addr).await?);
    }
    let (sessions, _) = all(sessions, o.warmup, o.payload).await?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let (c0, t0) = (self_cpu_secs(), Instant::now());
    let (sessions, events) = all(sessions, o.count, o.payload).await?;
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), self_cpu_secs() - c0);
    println!("done {wall:.6} {cpu:.6} {events}");
    std::io::stdout().flush()?;
    for s in sessions {
        s.delete().await;
    }
    Ok(())
}
