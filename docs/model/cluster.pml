/*
 * The cluster resume protocol (docs/SPEC.md §8), as a Promela model for
 * spin. docs/model/README.md has the step-by-step correspondence to the
 * code, the properties, the bounds and what the model leaves out;
 * scripts/model.sh runs it.
 *
 * Actors:
 *   - the store: a Redis primary P and its asynchronous replica R. Every
 *     Lua script is one atomic step on P; replication copies P to R at any
 *     moment between two scripts; a failover (at most one) promotes R, so
 *     it loses whatever R had not received.
 *   - node 0 runs request A (its own stream, stream 1) and may crash, or
 *     stall long enough for its lease to run out. Request A's
 *     notifications go through node 0's append queue (group commit: a
 *     publish queues and returns; the appender writes the whole queue as
 *     one batch; the answer waits until the queue is written). Node 1 runs request B
 *     (stream 2, so that two nodes append to one session) and the reaper.
 *     Each node has a follower filling its local replica from P.
 *   - the client of request A: reads A's stream over SSE from node 0,
 *     keeps the last (seq, check) as its cursor, and resumes on any node.
 *     Each SSE write is a chunk of one or more events, marked delivered in
 *     the store by one mark (its last event of stream 1) before it is sent.
 *
 * Events are named by their nonce: every append draws a fresh one (a
 * random 64-bit nonce never repeats at these bounds). Ghost arrays indexed
 * by nonce keep what the event is (seq, stream, answer or not) and, for
 * the properties, the nonce of its stream's previous event in the log it
 * was appended to.
 *
 * Properties:
 *   (a) no hole, no foreign event: every event the client accepts directly
 *       follows, in its stream, the event its cursor names (assert in
 *       accept()).
 *   (b) every request ends: the client ends with its answer, the reaper's
 *       error, or an explicit refusal, never waiting forever (spin's
 *       invalid end state); never two answers in one log (assert in
 *       append()).
 *   (c) seqs dense and unique: an append writes the next seq, into an
 *       empty slot, and P's seqs 1..head are all present (assert in
 *       append(), dense()).
 *   (d) a delivery mark counts only events some node sent: every event of
 *       stream 1 at or below P's delivered mark was sent (assert in
 *       marks_ok()).
 *   (e) write-ahead: an event reaches the client only when the store holds
 *       it and counts it delivered (assert in accept()), so a resume with
 *       it as the cursor, on any node, is decided on the store's facts.
 *
 * Seeded bugs (each must give a counterexample):
 *   -DSKIP_NONCE_CHECK   facts/decide ignore the cursor's check      -> (a)
 *                        (run on deliver.lua as it is, with -DNO_MARK_CHECK,
 *                        which turns (d) and (e) off: with FIX_MARK_BEYOND_HEAD
 *                        row 6 refuses first)
 *   -DNO_ORPHAN_REAPER   no node answers a dead node's requests      -> (b)
 *   -DMARK_WITHOUT_NONCE mark_delivered without the replica's nonce  -> (d)
 *   -DDELIVER_BEFORE_STORED a batch enters node 0's replica (and may be
 *                        sent) before the store holds it             -> (e)
 *                        (run with -DNO_FAILOVER and without
 *                        FIX_MARK_BEYOND_HEAD, whose head check refuses
 *                        such a batch's mark as well)
 *   -DMARK_AFTER_WRITE   a write's mark is recorded after the chunk
 *                        is sent                                     -> (e)
 *   -DNO_SAFETY_NET      followers are woken by announcements alone,
 *                        LOSSES of which may be lost                 -> (b)
 *
 * Findings in the code as it was: each has a fix behind a macro (all
 * three are in the code); without it spin reports a counterexample
 * (README.md, "What spin found"):
 *   -DFIX_MARK_BEYOND_HEAD  deliver.lua refuses a checked mark beyond the
 *                           store's head                          -> (d)
 *   -DFIX_WAIT              register_request, answer and the reaper's
 *                           orphan call are acknowledged only once the
 *                           replica has them (Redis WAIT)          -> (b)
 *   -DFIX_HANDOFF_CHECK     a resume's replay and its live hand-off check
 *                           that the event at plan.to is still the
 *                           decided one                            -> (a)
 *
 * -DNO_FAILOVER leaves the failover out (the seeded batch bug's run).
 *
 * Bounds: TRIES (resumes per client), DROPS (connections that drop
 * without a fault), QN (request A's notifications: 1, or 2 for batches
 * of two); scripts/model.sh sets them. LOSSES (announcements lost, 1).
 */

#ifndef QN
#define QN 1            /* request A's notifications, queued in node 0's append queue (1 or 2) */
#endif
#if QN == 1
#define MAXS 7          /* seqs 1..6 (0: none) */
#define NN 8            /* nonces 1..7 (0: none) */
#else
#define MAXS 9
#define NN 10
#endif
#ifndef DROPS
#define DROPS 1         /* connections that drop without a fault */
#endif
#ifndef TRIES
#define TRIES 3         /* resumes a client makes before it gives up */
#endif

/* ---- ghost facts of each event, by nonce (never change once written) ---- */
byte gseq[NN];
byte gstr[NN];
byte gprev[NN];         /* nonce of the stream's previous event when appended */
bool gterm[NN];         /* the request's answer (or the reaper's error): ends its stream */
bool gerr[NN];          /* the reaper's -32090 error */
bool gsent[NN];         /* some node sent it to the client (or tried to) */
byte nextn;

/* ---- the store: primary P, asynchronous replica R ---- */
/* meta head, the log's nonces per seq, stream 1's delivered mark, meta rw,
 * node 0's registered request (node:0:requests), stream 1 ended */
byte Phead; byte Pn[MAXS]; byte Pdel; byte Prw; bool Preg; bool Pend;
byte Rhead; byte Rn[MAXS]; byte Rdel; byte Rrw; bool Rreg; bool Rend;
bool dirty;             /* P has writes R has not received */
bool failed;            /* the one failover happened */
bool answered;          /* request A's own answer was acknowledged */

/* ---- node 0's append queue (gapless_redis::Appender): group commit ---- */
byte q[QN];             /* nonces queued by request A, not yet written */
byte qn;

/* ---- nodes ---- */
bool crashed0;          /* node 0 died (node 1 never does) */
bool expired0;          /* node 0's lease ran out (it died, or only stalled) */
/* local replicas (backend/cluster/replica.rs start_replica / follow): events lbase+1..lh */
bool lvalid[2];
byte lbase[2];
byte lh[2];
byte lpn[2];            /* the nonce at the follower's position (Place.check) */
bool lend[2];
byte lbn[2];            /* the nonce at lbase (attach.lua's `at`) */           /* the replica has stream 1's end (apply(TailEntry::Ended)) */
byte linc[2];           /* incarnation: bumped when the replica is dropped */
byte ln[2 * MAXS];

#define alive(k)   ((k) == 1 || !crashed0)
#define LN(k, s)   ln[(k) * MAXS + (s)]

/* ---- pushed wake-ups (docs/SPEC.md §8.1) ----
 * A follower reads the log only when woken: by the store's announcement of
 * a change (every write below), by a request that waits for its replica
 * (Cluster::applied), or by the node's safety net (keeper.rs probe_some).
 * Up to LOSSES announcements are lost; one that arrives before the change
 * it announces wakes a follower that finds nothing yet, which is the same
 * as losing it. */
#ifndef LOSSES
#define LOSSES 1
#endif
bool woken[2];
byte lost;
#define behind(k)  (Phead != lh[k] || (lh[k] > 0 && Pn[lh[k]] != lpn[k]))

/* With LOSSES 0 every announcement arrives: a follower reads whenever the
 * log holds more (the model as it was before pushed wake-ups, with fewer
 * states; the runs about other bugs use it). */
#if LOSSES > 0
#define WOKEN(k)   woken[k]
inline announce(j) {
  if
  :: woken[j] = true
  :: lost < LOSSES -> lost++; printf("MSC: announcement to node %d lost\n", j)
  fi
}
#else
#define WOKEN(k)   true
#define announce(j) skip
#endif

/* ---- the client of request A ---- */
#define WAITING  0
#define ANSWER   1
#define ERROR    2
#define REFUSED  3
#define NOCURSOR 4
#define GAVEUP   5
byte outcome;

/* P's seqs are dense: 1..head present, nothing above (property c). */
inline dense() {
  i = 1;
  do
  :: i < MAXS -> assert((i <= Phead) == (Pn[i] != 0)); i++
  :: else -> break
  od
}

/* Every event of stream 1 at or below the delivered mark was sent (d). */
inline marks_ok() {
#ifdef NO_MARK_CHECK
  skip
#else
  i = 1;
  do
  :: i <= Pdel && i <= Phead ->
     assert(gstr[Pn[i]] != 1 || gsent[Pn[i]]);
     i++
  :: else -> break
  od
#endif
}

/* The nonce of stream s's last event in P (the record's high mark). */
inline last_of(s, out) {
  i = Phead; out = 0;
  do
  :: i > 0 && gstr[Pn[i]] == s -> out = Pn[i]; break
  :: i > 0 && gstr[Pn[i]] != s -> i--
  :: i == 0 -> break
  od
}

/* lib.lua write_events, one event: event x (its nonce) at seq head + 1. */
inline write(x, s, term, err) {
  seq = Phead + 1;
  assert(seq < MAXS);
  assert(Pn[seq] == 0);                    /* (c) unique: the slot is free */
  last_of(s, gprev[x]);
  gseq[x] = seq; gstr[x] = s; gterm[x] = term; gerr[x] = err;
  Pn[seq] = x; Phead = seq;
  printf("MSC: append stream %d seq %d nonce %d (answer %d, reaper error %d)\n", s, seq, x, term, err);
  if
  :: term && s == 1 -> assert(!Pend); Pend = true   /* (b) one answer per log */
  :: else -> skip
  fi;
  dirty = true;
  announce(0); announce(1)                 /* the script's PUBLISH */
}

/* One event with a fresh nonce (orphan.lua's answer or error, request B's
 * answer). append.lua refuses a stream that ended ({'ended', s}); so does
 * orphan.lua ({'done'}). `ok` tells the caller. */
inline append(s, term, err, ok) {
  if
  :: s == 1 && Pend -> ok = false
  :: else ->
     ok = true;
     nextn++;
     assert(nextn < NN);
     write(nextn, s, term, err)
  fi
}

/* lib.lua note_seen: a node saw `seen` as the head; above P's head the
 * seqs between were lost (meta rw). */
inline note_seen(seen) {
  if
  :: seen > Phead && seen > Prw -> Prw = seen; dirty = true; printf("MSC: store records rw %d\n", seen)
  :: else -> skip
  fi
}

/* attach.lua + Cluster::start_replica: a fresh replica at the store's head
 * (the ring starts at head + 1; Place.check is the nonce at head). */
inline attach(k) {
  lvalid[k] = true; lbase[k] = Phead; lh[k] = Phead; lpn[k] = Pn[Phead]; lbn[k] = Pn[Phead]; lend[k] = Pend
}

/* on_gone / feed's conn.hub.remove: the replica is dropped, its open
 * streams end. */
inline drop(k) {
  lvalid[k] = false; linc[k]++
}

/* Replication: R receives every write P has. */
inline replicate() {
  Rhead = Phead; Rdel = Pdel; Rrw = Prw; Rreg = Preg; Rend = Pend;
  i = 0;
  do :: i < MAXS -> Rn[i] = Pn[i]; i++ :: else -> break od;
  dirty = false
}

/* FIX_WAIT (finding 2's fix; in the code: durable.rs): the write is acknowledged
 * only once the replica has it (Redis WAIT 1 succeeded). */
#ifdef FIX_WAIT
#define waited() replicate()
#else
#define waited() skip
#endif

/* ---- Redis: asynchronous replication and one failover ---- */
proctype Redis() {
  byte i;
end_redis:
  do
  :: atomic {
       dirty ->                             /* the replica catches up */
       replicate();
       printf("MSC: replica synced at head %d\n", Rhead)
     }
#ifndef NO_FAILOVER
  :: atomic {
       !failed && dirty
       ->                                    /* promote the replica */
       failed = true;
       printf("MSC: FAILOVER: replica promoted, head %d -> %d\n", Phead, Rhead);
       Phead = Rhead; Pdel = Rdel; Prw = Rrw; Preg = Rreg; Pend = Rend;
       i = 0;
       do :: i < MAXS -> Pn[i] = Rn[i]; i++ :: else -> break od;
       dirty = false;
       marks_ok()
     }
#endif
  od
}

/* ---- node 0's faults: a crash, or a stall its lease does not survive ---- */
proctype Faults() {
  if
  :: skip                                    /* no fault */
  :: atomic { crashed0 = true; printf("MSC: node 0 crashes\n") };     /* kill -9 */
     atomic { expired0 = true; printf("MSC: node 0's lease expires\n") }  /* later */
  :: atomic { expired0 = true; printf("MSC: node 0 stalls; its lease expires\n") } /* only slow */
  fi
}

/* Appender::enqueue: the event takes its place in the queue; no seq yet. */
inline enqueue() {
  nextn++;
  assert(nextn < NN && qn < QN);
  q[qn] = nextn; qn++;
  printf("MSC: node 0 queues nonce %d\n", nextn)
}

/* ---- request A on node 0: protocol/dispatch_2025.rs start_request + respond ---- */
proctype RequestA() {
  byte i, seq; bool ok;
  {
    atomic { Preg = true; dirty = true; waited(); printf("MSC: node 0 registers request A\n") };    /* RedisStore::register_request */
    /* QN notifications (ctx.notify -> SessionStore::publish_* ->
     * Appender::enqueue): each is queued and returns at once; Appender0
     * writes the queue. */
    atomic { enqueue() };
#if QN > 1
    atomic { enqueue() };
#endif
    /* The answer waits until the store has answered everything queued
     * before it (SessionStore::settle -> Appender::barrier). */
    qn == 0;
    atomic {                                 /* RedisStore::answer -> orphan.lua */
      append(1, true, false, ok); dense(); marks_ok(); waited();
      if :: ok -> answered = true :: else -> skip fi
    };
    atomic { Preg = false; dirty = true; printf("MSC: node 0 finishes request A\n") }    /* RedisStore::finish_request */
  } unless { crashed0 }
}

/* ---- node 0's appender: one batch (append.lua) is the whole queue ---- */
/* append.lua: the whole batch in one script call, in queue order, or
 * nothing of it (refused: stream 1 ended; its events fail unsent). */
inline write_batch() {
  if
  :: Pend -> printf("MSC: batch refused: stream 1 ended; its events fail unsent\n")
  :: else ->
     j = 0;
     do :: j < qn -> write(q[j], 1, false, false); j++ :: else -> break od;
     dense(); marks_ok()
  fi;
  qn = 0
}

#ifdef DELIVER_BEFORE_STORED
#define early() (lvalid[0] && lh[0] == Phead && !lend[0])
#else
#define early() false
#endif

proctype Appender0() {
  byte i, j, seq;
end_appender:
  do
  /* The answer brings the batch into node 0's replica (apply.rs), in seq
   * order after the events before it: the follower's step stands for both
   * (only other nodes' events are read from the log). */
  :: atomic { !crashed0 && qn > 0 && !early() -> write_batch() }
#ifdef DELIVER_BEFORE_STORED
  /* Seeded bug: the batch enters node 0's replica, numbered as the store
   * will number it, before the store holds it; the store writes it later,
   * or never (the node dies first, or the stream ended meanwhile). */
  :: atomic {
       !crashed0 && qn > 0 && early() ->
       j = 0;
       do
       :: j < qn ->
          seq = lh[0] + 1; gseq[q[j]] = seq; gstr[q[j]] = 1;
          if :: j > 0 -> gprev[q[j]] = q[j - 1] :: else -> last_of(1, gprev[q[j]]) fi;
          lh[0] = seq; LN(0, seq) = q[j]; lpn[0] = q[j];
          printf("MSC: node 0's replica takes nonce %d at seq %d before the store has it\n", q[j], seq);
          j++
       :: else -> break
       od
     };
     atomic {
       if
       :: !crashed0 && !Pend && Phead + 1 == gseq[q[0]] -> write_batch()
       :: else -> qn = 0; printf("MSC: the batch is never stored\n")
       fi
     }
#endif
  od
}

/* ---- request B on node 1: its answer, on stream 2 ---- */
proctype RequestB() {
  byte i, seq; bool ok;
  atomic { append(2, true, false, ok); dense(); marks_ok() }
}

/* ---- node 1's reaper: RedisStore::reap ---- */
#ifndef NO_ORPHAN_REAPER
proctype Reaper() {
  byte i, seq; bool ok, open;
  /* Every second: EXISTS node:0:alive is 0, the lock is ours, HGETALL
   * node:0:requests holds request A (a failover may bring it back). */
end_reaper:
  do
  :: atomic { expired0 && Preg -> open = true };
     atomic { append(1, true, true, ok); dense(); marks_ok(); waited() };  /* orphan.lua: error + end, unless ended */
     atomic { Preg = false; dirty = true }    /* HDEL */
  od
}
#endif

/* ---- followers: Cluster::follow, one tail.lua call per step, only when
 * woken; back to sleep once caught up ---- */
proctype Follower(byte k) {
end_follow:
  do
#if LOSSES > 0
  :: atomic { woken[k] && !(alive(k) && lvalid[k] && behind(k)) -> woken[k] = false }
#endif
  :: atomic {
       alive(k) && lvalid[k] && WOKEN(k) && behind(k) ->
       note_seen(lh[k]);                      /* tail.lua, ARGV[3] */
       if
       :: Phead < lh[k] || (lh[k] > 0 && Pn[lh[k]] != lpn[k]) ->
          drop(k); printf("MSC: follower %d: replica stale, dropped\n", k)   /* backend/cluster/replica.rs rewritten() */
       :: else ->
          lh[k]++;                            /* apply(): one entry */
          LN(k, lh[k]) = Pn[lh[k]];
          lpn[k] = Pn[lh[k]];
          if :: gstr[lpn[k]] == 1 && gterm[lpn[k]] -> lend[k] = true :: else -> skip fi;
          printf("MSC: follower %d applies seq %d nonce %d\n", k, lh[k], lpn[k])
       fi
     }
  od
}

/* ---- the safety net (keeper.rs probe_some): a node looks at a session's
 * log now and then and wakes its follower if the log holds more ---- */
#if !defined(NO_SAFETY_NET) && LOSSES > 0
proctype SafetyNet() {
end_net:
  do
  :: atomic { alive(0) && lvalid[0] && behind(0) && !woken[0] -> woken[0] = true; printf("MSC: safety net wakes node 0\n") }
  :: atomic { lvalid[1] && behind(1) && !woken[1] -> woken[1] = true; printf("MSC: safety net wakes node 1\n") }
  od
}
#endif

init {
  atomic {
    attach(0); attach(1);                    /* both nodes follow from the start */
    run Redis(); run Faults();
    run RequestA(); run Appender0(); run RequestB();
#ifndef NO_ORPHAN_REAPER
    run Reaper();
#endif
    run Follower(0); run Follower(1);
#if !defined(NO_SAFETY_NET) && LOSSES > 0
    run SafetyNet();
#endif
    run Client()
  }
}

/* deliver.lua for a write whose last event of stream 1 is x (none: 0):
 * refused if the store's event at its seq has another nonce (or, with
 * FIX_MARK_BEYOND_HEAD, its seq is beyond the head); the stream ends. */
inline mark(x) {
  if
  :: x == 0 -> skip
  :: else ->
     seq = gseq[x];
#ifdef MARK_WITHOUT_NONCE
     ok = true;                               /* seeded: no nonce compared */
#else
     ok = (Pn[seq] == 0 || Pn[seq] == x);
#endif
#ifdef FIX_MARK_BEYOND_HEAD
     ok = ok && seq <= Phead;                 /* finding 1's fix: beyond the head is lost too */
#endif
     if
     :: !ok -> ended = true; printf("MSC: client: mark seq %d refused (rewritten), stream ends\n", seq)
     :: else ->
        if :: seq > Pdel -> Pdel = seq; dirty = true :: else -> skip fi;
        printf("MSC: node %d marks seq %d delivered\n", k, seq)
     fi
  fi
}

/* The client reads event x of stream 1 (its own stream). */
inline accept(x) {
  gsent[x] = true;
  printf("MSC: client accepts seq %d nonce %d (cursor was %d/%d)\n", gseq[x], x, cq, cn);
  assert(gprev[x] == cn);                     /* (a) */
#ifndef NO_MARK_CHECK
  /* (e) write-ahead: the store holds x and counts it delivered */
  assert(gseq[x] <= Phead && Pn[gseq[x]] == x && Pdel >= gseq[x]);
#endif
  cq = gseq[x]; cn = x;
  if
  :: gterm[x] && gerr[x] -> outcome = ERROR
  :: gterm[x] && !gerr[x] -> outcome = ANSWER
  :: else -> skip
  fi
}

/* ---- the client of request A ---- */
proctype Client() {
  byte i, seq;
  byte cq, cn;          /* cursor: seq and check */
  byte k;               /* the node serving the connection */
  byte inc;             /* the replica incarnation the connection reads */
  byte sp;              /* feed position on that replica */
  byte buf[MAXS];       /* a replay still to send */
  byte nb, bi;
  byte tries, drops;
  byte seen, to, phead, x, tn;
  byte chunk[MAXS];     /* one write */
  byte c, j, lastx;
  bool ok, ended, one;

  /* The POST's SSE response: node 0's replica, from the stream's start. */
  k = 0; inc = linc[0]; sp = 0; nb = 0; bi = 0;

live:
  /* The SSE body (sse.rs poll_next): one write is a chunk of one or more
   * events, the store's replay first, then the replica's; its last event
   * of stream 1 is marked delivered in the store, with the replica's
   * nonce, before the chunk is sent (SessionStore::mark_write ->
   * RedisStore::mark_delivered -> deliver.lua): one mark per write. */
  do
  :: atomic {
       alive(k) && lvalid[k] && linc[k] == inc && !ended && (bi < nb || lh[k] > sp) ->
       c = 0; lastx = 0;
       /* fill(): everything there is, or (when the rest is not ready yet)
        * the first event only */
       if :: one = true :: one = false fi;
       do
       :: c > 0 && (one || (bi >= nb && lh[k] <= sp)) -> break
       :: else ->
          if
          :: bi < nb -> x = buf[bi]; bi++
          :: else -> sp++; x = LN(k, sp)
          fi;
          chunk[c] = x; c++
       od;
       j = 0;
       do
       :: j < c -> if :: gstr[chunk[j]] == 1 -> lastx = chunk[j] :: else -> skip fi; j++
       :: else -> break
       od;
#ifndef MARK_AFTER_WRITE
       mark(lastx);
#endif
       if
       :: ended -> skip
       :: else ->                            /* the chunk is sent; the client reads it */
          j = 0;
          do
          :: j < c -> if :: gstr[chunk[j]] == 1 -> accept(chunk[j]) :: else -> skip fi; j++
          :: else -> break
          od;
          marks_ok()
       fi
     };
#ifdef MARK_AFTER_WRITE
     /* Seeded bug: the mark is recorded after the write. */
     atomic { mark(lastx); marks_ok() };
#endif
     if :: outcome != WAITING -> goto done :: else -> skip fi
  :: !(alive(k) && lvalid[k] && linc[k] == inc && !ended) -> goto resume   /* node died, replica dropped, stream ended */
  :: atomic { lend[k] && bi >= nb && lh[k] <= sp ->                         /* the replica's stream ended: Next::End */
       printf("MSC: client: the stream ends without its answer\n") };
     goto resume
  :: drops < DROPS -> drops++; printf("MSC: client: connection drops\n"); goto resume                           /* the connection dropped */
  od;

resume:
  /* session/table.rs resume_lane, backend/cluster/resume.rs resume_stream, with Last-Event-ID = cursor */
  if
  :: cn == 0 -> outcome = NOCURSOR; goto done   /* no event yet: the POST just failed */
  :: else -> skip
  fi;
  tries++;
  if
  :: tries > TRIES -> outcome = GAVEUP; goto done  /* 503s: the client gives up, explicitly */
  :: else -> skip
  fi;
  if                                          /* any node the client can reach */
  :: !crashed0 -> k = 0
  :: k = 1
  fi;
  atomic {                                    /* live_conn: attach if needed */
    if :: !lvalid[k] -> attach(k) :: else -> skip fi;
    seen = lh[k];                             /* the replica's head, before the decision */
    printf("MSC: client resumes on node %d with cursor %d/%d (replica head %d)\n", k, cq, cn, seen)
  };
  atomic {
    /* RedisStore::resume_seen -> facts.lua (note_seen) -> session::decide */
    note_seen(seen);
#ifdef SKIP_NONCE_CHECK
    ok = true;
#else
    ok = !((cq > Phead && cq <= Prw) || (cq <= Phead && Pn[cq] != cn));
#endif
    if
    :: !ok -> outcome = REFUSED; printf("MSC: 409 history_rewritten\n")
    :: ok && cq > Phead -> outcome = REFUSED; printf("MSC: 409 cursor_ahead\n")
    :: ok && cq <= Phead && cq > Pdel -> outcome = REFUSED; printf("MSC: 409 cursor_not_delivered\n")
    :: else -> to = Phead; phead = Phead; tn = Pn[to]; printf("MSC: store decides 200, replay %d..%d\n", cq + 1, to)
    fi
  };
  if :: outcome != WAITING -> goto done :: else -> skip fi;
  atomic {
    /* RedisStore::replay: every seq cq+1..to must be there (else Moved) */
    if
    :: Phead < to -> nb = 255                 /* Moved: decide again */
#ifdef FIX_HANDOFF_CHECK
    :: Phead >= to && Pn[to] != tn -> nb = 255  /* finding 3's fix: another event at plan.to */
#endif
    :: else ->
       nb = 0; bi = 0; i = cq + 1;
       do
       :: i <= to -> if :: gstr[Pn[i]] == 1 -> buf[nb] = Pn[i]; nb++ :: else -> skip fi; i++
       :: else -> break
       od
    fi
  };
  if :: nb == 255 -> nb = 0; goto resume :: else -> skip fi;
  /* feed(): seen > plan.head -> the replica is stale: drop it, decide again */
  if
  :: seen > phead -> atomic { if :: lvalid[k] -> drop(k) :: else -> skip fi }; goto resume
  :: else -> skip
  fi;
  /* caught_up(plan.to) (5 s), then subscribe_stream(stream, plan.to); it
   * wakes the follower first (an announcement it waits for may be lost) */
#if LOSSES > 0
  woken[k] = true;
#endif
  if
  :: atomic { lvalid[k] && lh[k] >= to && to >= lbase[k] ->
#ifdef FIX_HANDOFF_CHECK
       /* finding 3's fix: the replica's event at plan.to is the decided one */
       if
       :: (to == lbase[k] && lbn[k] != tn) || (to > lbase[k] && LN(k, to) != tn) -> ended = true
       :: else -> ended = false
       fi;
#else
       ended = false;
#endif
       inc = linc[k]; sp = to };
     if :: ended -> ended = false; goto resume :: else -> goto live fi
  :: goto resume                              /* timed out, or the replica went: 503 / decide again */
  fi;

done:
  printf("MSC: client outcome %d (1 answer, 2 error, 3 refused, 4 no cursor, 5 gave up)\n", outcome);
  assert(outcome != WAITING)
}
