/* common/runtime/abort.h — ending the waits of calls that lost a peer.
 *
 * Purpose: when a rank dies, its peers may be waiting for it in a collective
 * (collective.c) or on a weight or data channel (channel.c), and would wait
 * until their timeout (actor.comm_timeout_s, 120 s by default). The driver
 * learns of the death from the process's exit or from the heartbeat
 * (interval × liveness) and tells the survivors (RL_WORKER_ABORT,
 * rlrt/runtime/worker.h); a worker that loses its driver, or stops, does the
 * same to itself. rl_abort_raise() moves this process's abort epoch on, and
 * every such wait that belongs to an earlier call ends within
 * RL_ABORT_POLL_MS with RL_EPEER and the reason, so recovery is bounded by
 * the heartbeat, not by a collective's timeout.
 *
 * Which waits end: a wait compares the epoch with its base. On a thread
 * that runs a worker's call the base is the epoch when that call ARRIVED
 * (rl_abort_scope_set, done by the worker loop), so an abort ends the waits
 * of every call received before it, running or still queued, and none of
 * the calls that come after it (the recovery's). On any other thread the
 * base is the epoch when the wait's operation started.
 *
 * Invariants: the epoch starts at 1 and only grows; rl_abort_pending is one
 * atomic load. Threading: every function may be called from any thread; a
 * scope is per thread. Nothing here allocates or prints.
 */
#ifndef RLRT_COMMON_RUNTIME_ABORT_H
#define RLRT_COMMON_RUNTIME_ABORT_H

#include <stdint.h>

/* The longest a wait sleeps before it looks at the epoch again. */
#define RL_ABORT_POLL_MS 50

/* The current epoch (>= 1). */
uint64_t rl_abort_epoch(void);
/* Ends every wait whose base is older than now; `why` (may be NULL) is kept
 * for their error messages (the newest one wins; truncated to 255 bytes). */
void rl_abort_raise(const char *why);
/* How many times rl_abort_raise was called in this process. */
uint64_t rl_abort_count(void);
/* This thread runs a call that arrived at `epoch` (0: none). */
void rl_abort_scope_set(uint64_t epoch);
/* The base of a wait starting now on this thread: its scope, else the
 * current epoch. */
uint64_t rl_abort_base(void);
/* 1 when an abort came after `base`. */
int rl_abort_pending(uint64_t base);
/* RL_OK, or (an abort came after `base`) RL_EPEER with the message
 * "<what>: aborted: <why>". */
int rl_abort_check(uint64_t base, const char *what);

#endif
