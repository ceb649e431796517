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
 *     stall long enough for its lease to run out; node 1 runs request B
 *     (stream 2, so that two nodes append to one session) and the reaper.
 *     Each node has a follower filling its local replica from P.
 *   - the client of request A: reads A's stream over SSE from node 0,
 *     keeps the last (seq, check) as its cursor, and resumes on any node.
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
 *
 * Seeded bugs (each must give a counterexample):
 *   -DSKIP_NONCE_CHECK   facts/decide ignore the cursor's check      -> (a)
 *                        (run on deliver.lua as it is, with -DNO_MARK_CHECK:
 *                        with FIX_MARK_BEYOND_HEAD row 6 refuses first)
 *   -DNO_ORPHAN_REAPER   no node answers a dead node's requests      -> (b)
 *   -DMARK_WITHOUT_NONCE mark_delivered without the replica's nonce  -> (d)
 *
 * Findings in the code as it is: each has a fix behind a macro (not in
 * the code yet); without it spin reports a counterexample (README.md,
 * "What spin found"):
 *   -DFIX_MARK_BEYOND_HEAD  deliver.lua refuses a checked mark beyond the
 *                           store's head                          -> (d)
 *   -DFIX_WAIT              register_request, answer and the reaper's
 *                           orphan call are acknowledged only once the
 *                           replica has them (Redis WAIT)          -> (b)
 *   -DFIX_HANDOFF_CHECK     a resume's replay and its live hand-off check
 *                           that the event at plan.to is still the
 *                           decided one                            -> (a)
 *
 * Bounds: TRIES (resumes per client), DROPS (connections that drop
 * without a fault); scripts/model.sh sets them.
 */

#define MAXS 7          /* seqs 1..6 (0: none) */
#define NN 8            /* nonces 1..7 (0: none) */
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

/* lib.lua write_events: the event at seq head + 1 with a fresh nonce.
 * append.lua refuses a stream that ended ({'ended', s}); so does
 * orphan.lua ({'done'}). `ok` tells the caller. */
inline append(s, term, err, ok) {
  if
  :: s == 1 && Pend -> ok = false
  :: else ->
     ok = true;
     nextn++;
     assert(nextn < NN);
     seq = Phead + 1;
     assert(seq < MAXS);
     assert(Pn[seq] == 0);                 /* (c) unique: the slot is free */
     last_of(s, gprev[nextn]);
     gseq[nextn] = seq; gstr[nextn] = s; gterm[nextn] = term; gerr[nextn] = err;
     Pn[seq] = nextn; Phead = seq;
     printf("MSC: append stream %d seq %d nonce %d (answer %d, reaper error %d)\n", s, seq, nextn, term, err);
     if
     :: term && s == 1 -> assert(!Pend); Pend = true   /* (b) one answer per log */
     :: else -> skip
     fi;
     dirty = true
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

/* ---- request A on node 0: protocol/dispatch_2025.rs start_request + respond ---- */
proctype RequestA() {
  byte i, seq; bool ok;
  {
    atomic { Preg = true; dirty = true; waited(); printf("MSC: node 0 registers request A\n") };    /* RedisStore::register_request */
    atomic { append(1, false, false, ok); dense(); marks_ok() };  /* a notification: Appender -> append.lua */
    atomic {                                 /* RedisStore::answer -> orphan.lua */
      append(1, true, false, ok); dense(); marks_ok(); waited();
      if :: ok -> answered = true :: else -> skip fi
    };
    atomic { Preg = false; dirty = true; printf("MSC: node 0 finishes request A\n") }    /* RedisStore::finish_request */
  } unless { crashed0 }
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

/* ---- followers: Cluster::follow, one tail.lua call per step ---- */
proctype Follower(byte k) {
end_follow:
  do
  :: atomic {
       alive(k) && lvalid[k] &&
       (Phead != lh[k] || (lh[k] > 0 && Pn[lh[k]] != lpn[k])) ->
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

init {
  atomic {
    attach(0); attach(1);                    /* both nodes follow from the start */
    run Redis(); run Faults();
    run RequestA(); run RequestB();
#ifndef NO_ORPHAN_REAPER
    run Reaper();
#endif
    run Follower(0); run Follower(1);
    run Client()
  }
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
  bool ok, ended;

  /* The POST's SSE response: node 0's replica, from the stream's start. */
  k = 0; inc = linc[0]; sp = 0; nb = 0; bi = 0;

live:
  /* The SSE body (sse.rs poll_next): each event is marked delivered in
   * the store with the replica's nonce before it is sent
   * (Conn::mark_ahead -> RedisStore::mark_delivered -> deliver.lua). */
  do
  :: atomic {
       alive(k) && lvalid[k] && linc[k] == inc && !ended && (bi < nb || lh[k] > sp) ->
       if
       :: bi < nb -> x = buf[bi]; bi++      /* the store's replay first */
       :: else -> sp++; x = LN(k, sp)        /* then the replica's live events */
       fi;
       if
       :: gstr[x] != 1 -> skip                /* another stream's event */
       :: else ->
          seq = gseq[x];
          /* deliver.lua: refused if the store's event at seq has another nonce */
#ifdef MARK_WITHOUT_NONCE
          ok = true;                           /* seeded: no nonce compared */
#else
          ok = (Pn[seq] == 0 || Pn[seq] == x);
#endif
#ifdef FIX_MARK_BEYOND_HEAD
          ok = ok && seq <= Phead;             /* finding 1's fix: beyond the head is lost too */
#endif
          if
          :: !ok -> ended = true; printf("MSC: client: mark seq %d refused (rewritten), stream ends\n", seq)
          :: else ->
             if :: seq > Pdel -> Pdel = seq; dirty = true :: else -> skip fi;
             gsent[x] = true;
             printf("MSC: node %d marks seq %d delivered, client accepts nonce %d (cursor was %d/%d)\n", k, seq, x, cq, cn);
             marks_ok();
             /* the client accepts it: property (a) */
             assert(gprev[x] == cn);
             cq = seq; cn = x;
             if
             :: gterm[x] && gerr[x] -> outcome = ERROR
             :: gterm[x] && !gerr[x] -> outcome = ANSWER
             :: else -> skip
             fi
          fi
       fi
     };
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
  /* caught_up(plan.to) (5 s), then subscribe_stream(stream, plan.to) */
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
