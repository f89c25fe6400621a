/* rlrt/runtime/worker.h — the rl-worker serve loop and role method tables.
 *
 * Purpose: a worker connects a DEALER to the driver's ROUTER and speaks
 *   HELLO [→ CHALLENGE → HELLO with proof] → CONFIGURE → READY, then
 *   CALL → REPLY | ERROR, HEARTBEAT both ways,
 *   SHUTDOWN / DISCONNECT.
 * Method handlers run on ONE compute thread, in arrival order; the main
 * thread runs a libuv loop (signals, heartbeat timer, the ZeroMQ socket) so
 * heartbeats keep flowing however long a handler takes. The compute thread
 * sends each call's REPLY/ERROR itself (the socket is shared under a mutex);
 * init/fini results go back to the loop through a queue and a uv_async.
 * Once READY is sent, the compute thread, idle with nothing queued, receives
 * from the socket itself (calls and heartbeats; anything else goes to the
 * loop, in order) and hands the socket back to the loop before it runs a
 * handler: a call wakes one thread of the worker, not two.
 * Methods declared inline (rl_worker_options.inline_methods) run on the
 * loop's thread instead when the loop receives them while the compute
 * thread is idle with nothing queued (order kept; they must be cheap).
 *
 * Failure handling (zguide Paranoid Pirate): if nothing arrives from the
 * driver for heartbeat × liveness, the worker assumes the driver is gone,
 * closes its socket and reconnects with exponential backoff (re-sending
 * HELLO with its job id, and answering the driver's CHALLENGE with a proof
 * of its slot token: the token itself is never sent); after `give_up_ms`
 * more without a driver it exits with status 2 (CONFIGURE sets give_up_ms
 * to the job's heartbeat.give_up_s). A driver that refuses it (another job,
 * a wrong proof) makes it exit with status 1.
 * An unknown method, a bad payload or a handler error becomes an ERROR reply,
 * never a crash of the worker.
 *
 * Methods: the role's table, plus the test methods of the options when the
 * driver's CONFIGURE says "test_methods": true. READY lists exactly the
 * methods served, and an unknown-method error names only those. Every worker
 * also answers the runtime's own RL_WORKER_DRAIN: a no-op that runs on the
 * compute thread, queued behind every call before it, so its reply says the
 * worker has finished them (rl_group_drain; declared retry-safe, so a
 * worker that reconnects during a drain gets it again); and RL_WORKER_ABORT, handled
 * on arrival by the loop whatever the compute thread does: every wait on a
 * peer (a collective, a weight or data channel) of the calls that arrived
 * before it, running or queued, ends within 50 ms with RL_EPEER naming the
 * reason (meta "why"), so a call that lost a peer fails at once instead of
 * at its timeout (rl_group_abort; the driver sends it to a dead rank's group
 * by itself). Answered at once, unless its call id is 0. A worker that
 * loses its driver, or stops, aborts its waits the same way.
 *
 * Configuration: the first CONFIGURE gives the job tree (JSON) and the
 * file:line:col of its nodes, applied to the tree, so a role's checks name
 * the job file: "job.yaml:14:3: rollout.response_length: must be >= 1, got
 * -1". The role's init runs once, on the compute thread, after it; a later
 * CONFIGURE (after a reconnect) keeps the tree and updates only the
 * heartbeat settings and which methods are served. Every number CONFIGURE
 * carries is range-checked; a bad one is an ERROR to the driver.
 *
 * Threading: rl_worker_ctx is shared between the loop and the compute
 * thread; handlers may read ctx->config and keep state in ctx->user, and
 * should poll rl_worker_should_stop() in long loops (true when the worker
 * stops or the running call was aborted).
 */
#ifndef RLRT_RUNTIME_WORKER_H
#define RLRT_RUNTIME_WORKER_H

#include <stdint.h>

#include "rlrt/config.h"
#include "rlrt/dataproto.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_worker_ctx {
    const char *role;
    int rank;
    int world_size;        /* ranks in this role's group (from CONFIGURE) */
    const char *node;
    rl_config *config;     /* the job config tree (from the first CONFIGURE;
                              fixed while the role runs) */
    void *user;            /* role state, owned by the role's init/fini */
    volatile int stop;     /* set when the worker is shutting down */
} rl_worker_ctx;

/* A handler: `in` is the call's DataProto (never NULL: an empty batch when
 * the call had none; meta carries small arguments). On success set *out (may
 * stay NULL for "no payload") and return 0; on failure return a negative
 * rl_status with rl_error_set() — the message goes back to the driver. */
typedef int (*rl_method_fn)(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);

typedef struct rl_method {
    const char *name;
    rl_method_fn fn;
} rl_method;

typedef struct rl_worker_role {
    const char *name;
    const rl_method *methods; /* terminated by {NULL, NULL} */
    /* Optional: called on the compute thread after CONFIGURE (config set). */
    int (*init)(rl_worker_ctx *ctx);
    void (*fini)(rl_worker_ctx *ctx);
} rl_worker_role;

typedef struct rl_worker_options {
    const char *role;
    int rank;
    const char *driver;    /* tcp://host:port */
    const char *node;      /* defaults to the host name */
    int heartbeat_ms;      /* until CONFIGURE says otherwise; default 1000 */
    int liveness;          /* default 3 */
    int give_up_ms;        /* exit 2 after this long without a driver; default 60000 */
    /* Until the first CONFIGURE: how long the driver may stay silent before
     * this worker reconnects, and before it gives up (at least the usual
     * liveness and give_up_ms). The driver's launcher passes its own wait
     * for a starting slot, so a driver busy starting hundreds of workers
     * is not taken for a dead one. 0 (default): the usual bounds. */
    int start_window_ms;
    /* Optional methods for tests ({NULL, NULL}-terminated; rl-worker passes
     * the selftest's table). Served only when the driver's CONFIGURE asks
     * for them (rl_driver_options.test_methods); a role method of the same
     * name wins. NULL: none. */
    const rl_method *test_methods;
    /* Retry-safe methods (NULL-terminated names; NULL: none): stateless and
     * idempotent, so when the worker dies during such a call the driver
     * runs it again on the restarted worker (cluster restart.call_retries)
     * instead of failing it. Declare only methods whose result depends on
     * the call's input and the job config alone. READY lists those served.
     * rl-worker takes them from its registry (workers/registry.c) and, for
     * the test methods, from the selftest's list. */
    const char *const *retry_safe;
    const char *const *test_retry_safe;
    /* Inline methods (NULL-terminated names; NULL: none), likewise for the
     * role's methods and the test methods: handlers that are surely cheap
     * (microseconds: no I/O, no waiting, no heavy compute). When the compute
     * thread is idle with nothing queued, such a call runs directly on the
     * I/O thread, saving the hand-off to the compute thread; otherwise it
     * queues like any call, so calls still run one at a time in arrival
     * order. A slow inline handler would delay heartbeats. */
    const char *const *inline_methods;
    const char *const *test_inline;
    /* The job this worker belongs to (rl-worker --job; spawned workers get
     * it from the driver). NULL/"": learned from the first CONFIGURE, and
     * kept: after that a driver of another job refuses the worker. */
    const char *job_id;
    /* The slot's token (spawned workers: RL_WORKER_TOKEN or stdin). NULL:
     * agreed with the driver by key exchange when the worker claims a free
     * slot. Proved on every later HELLO (common/runtime/handshake.h), never
     * sent. */
    const char *token;
    /* CurveZMQ: this worker's certificate (zcert file with the secret key)
     * and the driver's public key (Z85). Both or neither, except behind a
     * node relay (driver "ipc:///PATH", rlrt/runtime/relay.h): the
     * certificate alone, for the worker's own channels. */
    const char *cert;
    const char *driver_key;
    int64_t max_message_bytes; /* ZMQ_MAXMSGSIZE until CONFIGURE says; 0 = 256 MiB */
    int http_port;             /* read-only /healthz and /metrics; 0 = none */
    const char *http_bind;     /* default 127.0.0.1 */
    /* sd_notify READY/STOPPING/WATCHDOG (under systemd, NOTIFY_SOCKET set) */
    int sd_notify;
} rl_worker_options;

/* Exit statuses of rl-worker (and the values rl_worker_run returns). A
 * worker that exits RL_WORKER_EXIT_USAGE before saying HELLO is a fatal
 * start-up error for the driver (no restarts). */
/* The runtime's drain method (a name no role can take: roles' names have
 * no dot). */
#define RL_WORKER_DRAIN "rl.drain"
#define RL_WORKER_ABORT "rl.abort"

#define RL_WORKER_EXIT_OK 0
#define RL_WORKER_EXIT_ERROR 1    /* start-up error, init failed, refused */
#define RL_WORKER_EXIT_GAVE_UP 2  /* no driver for give_up_ms */
#define RL_WORKER_EXIT_USAGE 64   /* bad command line, unknown role (EX_USAGE) */

/* Runs until SHUTDOWN, SIGTERM/SIGINT (returns 0) or giving up on the driver
 * (returns 2); 1 on a start-up error (message set). */
int rl_worker_run(const rl_worker_options *opt, const rl_worker_role *role);

/* 1 when the worker is stopping or, called from a handler, its call was
 * aborted (RL_WORKER_ABORT): a long loop should return an error then. */
int rl_worker_should_stop(const rl_worker_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
