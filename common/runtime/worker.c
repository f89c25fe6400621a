/* worker.c — rl-worker serve loop (see rlrt/runtime/worker.h).
 *
 * Main thread: libuv loop with the DEALER socket (rl_zuv), a heartbeat timer,
 * a reconnect timer, SIGTERM/SIGINT handlers and a uv_async that wakes the
 * loop when the compute thread finished init/fini (READY goes out from the
 * loop) or took an edge of the socket. Compute thread: pops tasks (init,
 * calls, fini) from a queue and runs them in order, and sends each call's
 * REPLY/ERROR itself, with no hand-off back to the loop.
 *
 * The socket (w->sock, w->watch, w->generation, w->seq, w->last_send) is
 * guarded by w->smu, a recursive mutex: the loop holds it in every drain
 * (rl_zuv_start_locked), in its sends, heartbeats and (re)connects; the
 * compute thread holds it while it replies. Lock order: smu before mu. */
#include "rlrt/runtime/worker.h"
#include "common/core/util.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/health.h"
#include "common/runtime/abort.h"
#include "common/runtime/handshake.h"
#include "common/runtime/msg.h"
#include "common/runtime/net.h"
#include "common/runtime/value.h"
#include "common/runtime/zuv.h"
#include "rlrt/wire.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>
#include <zmq.h>

typedef enum { S_TASK_INIT, S_TASK_CALL, S_TASK_FINI } s_task_kind;

typedef struct s_task {
    s_task_kind kind;
    uint64_t call_id;
    uint64_t generation; /* connection generation the call arrived on */
    uint64_t abort_epoch; /* the abort epoch when it arrived (abort.h) */
    const rl_method *method;
    rl_dataproto *in;
    rl_dataproto *out;
    int rc;
    double compute_s; /* handler wall time on the compute thread */
    char error[1024];
    struct s_task *next;
} s_task;

typedef struct s_queue {
    s_task *head, *tail;
} s_queue;

typedef struct s_worker {
    uv_loop_t loop;
    void *zctx;
    void *sock;
    rl_zuv *watch;
    uv_timer_t hb_timer, reconnect_timer, wd_timer, http_timer;
    uv_signal_t sigterm, sigint, sighup;
    uv_async_t done_async;
    pthread_t compute;
    pthread_mutex_t mu;
    pthread_mutex_t smu; /* the socket: see the top of this file */
    int draining;        /* the loop is in a drain (holds smu); loop only */
    int wake_compute;    /* a task was queued in that drain; loop only */
    int wake_fd;         /* eventfd: wakes the compute thread (it waits in poll) */
    int direct;          /* under smu: READY went out on this connection, so
                            the idle compute thread may take the socket */
    rl_msg fwd;          /* under smu: a message the compute thread received */
    int has_fwd;         /* but leaves to the loop (has_fwd: it is there) */
    s_queue todo, done;
    int compute_quit;
    rl_worker_ctx ctx;
    const rl_worker_role *role;
    rl_worker_options opt;
    char node[256];
    int configured;   /* CONFIGURE received at least once */
    int serve_tests;  /* the last CONFIGURE asked for the test methods */
    int ready_sent;   /* READY sent on the current connection */
    int accepted;     /* a CONFIGURE came on the current connection: heartbeats
                         go out (before it the driver knows no such peer) */
    uint64_t generation;
    uint64_t last_recv, last_send, lost_since;
    int backoff_ms;
    int exit_code;
    int stopping;
    uint64_t seq;
    char job_id[33];   /* "" until known */
    char token[80];    /* the slot's token, "" until known; never sent */
    char routing_id[128]; /* of the current connection (HELLO proofs name it) */
    uint8_t kx_pk[RL_HS_KX_BYTES], kx_sk[RL_HS_KX_BYTES]; /* this connection's
                          key pair: a CONFIGURE that gives us a free slot
                          completes the key exchange that makes our token */
    char driver_key[RL_NET_KEY_TXT]; /* "" = plaintext */
    rl_http *http;
    uint64_t http_wait_since; /* its port is held (by an orphan?): waiting */
    long driver_pid;   /* our parent, the driver (local spawns), or 0 */
    /* metrics (under mu: the HTTP thread reads them) */
    int64_t m_calls, m_errors, m_bytes_in, m_bytes_out, m_queued, m_reconnects;
    double m_handler_s;
    int m_busy;        /* a handler runs */
    int m_connected;   /* READY sent on the current connection */
    uint64_t m_last_recv_ms;
} s_worker;

/* Stopping, or (on the thread running a call) the call was aborted. */
int rl_worker_should_stop(const rl_worker_ctx *ctx)
{
    return ctx->stop || rl_abort_pending(rl_abort_base());
}

static _Thread_local int s_compute_thread; /* 1 on the compute thread */

static void s_reply(s_worker *w, s_task *t);

/* ---- compute thread ---------------------------------------------------------------- */

static void s_push(s_queue *q, s_task *t)
{
    t->next = NULL;
    if (q->tail)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
}

static s_task *s_pop(s_queue *q)
{
    s_task *t = q->head;
    if (t) {
        q->head = t->next;
        if (!q->head)
            q->tail = NULL;
    }
    return t;
}

/* ---- fault injection ------------------------------------------------------------------
 * For the fault tests and `make bench-faults`: the environment variable
 *   RL_FAULT_INJECT="ROLE/RANK:METHOD:N:before|after:MARKER"
 * makes the worker ROLE/RANK kill itself with SIGKILL at its N-th call of
 * METHOD, before the handler runs or after it ran (before the reply leaves).
 * It fires once per job: the file MARKER is created first, and a worker that
 * finds it (the restarted one inherits the variable) stays armed no more.
 * Unset (production), nothing happens. */
typedef struct s_fault {
    char method[128], marker[1024];
    int64_t n, seen;
    int after;
} s_fault;

static s_fault s_fault_cfg;
static int s_fault_armed;

static void s_fault_setup(const char *role, int rank)
{
    const char *v = getenv("RL_FAULT_INJECT");
    char who[160], want[160], when[16];
    long long n = 0;
    if (!v || sscanf(v, "%159[^:]:%127[^:]:%lld:%15[^:]:%1023s", who, s_fault_cfg.method, &n, when,
                     s_fault_cfg.marker) != 5)
        return;
    snprintf(want, sizeof want, "%s/%d", role, rank);
    if (strcmp(who, want) != 0 || n < 1 || access(s_fault_cfg.marker, F_OK) == 0)
        return;
    s_fault_cfg.n = n;
    s_fault_cfg.after = strcmp(when, "after") == 0;
    s_fault_armed = 1;
    rl_log_warn("fault injection armed: SIGKILL at call %lld of %s (%s)", n, s_fault_cfg.method,
                when);
}

static void s_fault_check(s_worker *w, const char *method, int after)
{
    (void)w;
    if (!s_fault_armed || strcmp(method, s_fault_cfg.method) != 0)
        return;
    if (!after)
        s_fault_cfg.seen++;
    if (s_fault_cfg.seen != s_fault_cfg.n || after != s_fault_cfg.after)
        return;
    FILE *f = fopen(s_fault_cfg.marker, "w");
    if (f)
        fclose(f);
    rl_log_warn("fault injection: SIGKILL at call %lld of %s", (long long)s_fault_cfg.n, method);
    raise(SIGKILL);
}

/* And RL_FAULT_ANNOUNCE=PATH (make bench-faults) makes the worker send a
 * datagram "ROLE/RANK PID METHOD start|end" to the Unix socket PATH when a
 * call's handler starts and when it ends, so a fault bench can SIGKILL any
 * process at a moment it picks inside a phase. Sent without blocking; lost
 * when nobody reads. With RL_FAULT_HOLD="ROLE/RANK:METHOD:MS" as well, that
 * worker's handler of METHOD waits MS milliseconds after announcing its
 * start, so a call of a fraction of a millisecond (a reward) lasts long
 * enough to be killed inside (timing only: nothing it computes changes).
 * Unset, nothing is sent and nothing waits. */
static int s_announce_fd = -1;
static struct sockaddr_un s_announce_to;
static char s_announce_who[160];
static char s_hold_method[128];
static int s_hold_ms;

static void s_announce_setup(const char *role, int rank)
{
    const char *path = getenv("RL_FAULT_ANNOUNCE");
    if (!path || !path[0] || strlen(path) >= sizeof s_announce_to.sun_path)
        return;
    const char *hold = getenv("RL_FAULT_HOLD");
    char who[160], want[160];
    int ms = 0;
    snprintf(want, sizeof want, "%s/%d", role, rank);
    if (hold && sscanf(hold, "%159[^:]:%127[^:]:%d", who, s_hold_method, &ms) == 3 &&
        strcmp(who, want) == 0 && ms > 0 && ms <= 10000)
        s_hold_ms = ms;
    s_announce_to.sun_family = AF_UNIX;
    snprintf(s_announce_to.sun_path, sizeof s_announce_to.sun_path, "%s", path);
    snprintf(s_announce_who, sizeof s_announce_who, "%s/%d %d", role, rank, (int)getpid());
    s_announce_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

static void s_announce(const char *method, const char *what)
{
    if (s_announce_fd < 0)
        return;
    char m[400];
    int n = snprintf(m, sizeof m, "%s %s %s", s_announce_who, method, what);
    if (n > 0 && n < (int)sizeof m)
        (void)sendto(s_announce_fd, m, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&s_announce_to,
                     sizeof s_announce_to);
}

/* Runs call task t's handler (compute thread, or the loop for an inline
 * method while the compute thread is idle). */
static void s_run_call(s_worker *w, s_task *t)
{
    s_fault_check(w, t->method->name, 0);
    s_announce(t->method->name, "start");
    if (s_hold_ms && strcmp(t->method->name, s_hold_method) == 0)
        usleep((useconds_t)s_hold_ms * 1000);
    uint64_t t0 = uv_hrtime();
    /* its waits end when an abort comes after the call arrived */
    rl_abort_scope_set(t->abort_epoch);
    t->rc = t->method->fn(&w->ctx, t->in, &t->out);
    rl_abort_scope_set(0);
    t->compute_s = (double)(uv_hrtime() - t0) / 1e9;
    s_announce(t->method->name, "end");
    s_fault_check(w, t->method->name, 1);
}

/* Metrics of a replied call; frees it. */
static void s_call_done(s_worker *w, s_task *t)
{
    pthread_mutex_lock(&w->mu);
    w->m_busy = 0;
    w->m_calls++;
    w->m_errors += t->rc != 0;
    w->m_handler_s += t->compute_s;
    pthread_mutex_unlock(&w->mu);
    rl_dataproto_free(t->in);
    rl_dataproto_free(t->out);
    free(t);
}

static void s_wake_compute(s_worker *w)
{
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof one); /* EAGAIN: it is awake anyway */
    (void)r;
}

static int s_dispatch(s_worker *w, rl_msg *m);
static int s_recv_direct(s_worker *w);

/* Compute thread: gives the socket back to the loop (opens the gate) if
 * this thread took it on connection `*owned`; under smu. */
static void s_give_socket_locked(s_worker *w, uint64_t *owned)
{
    if (*owned && *owned == w->generation && w->watch)
        rl_zuv_gate(w->watch, 1);
    *owned = 0;
}

/* Compute thread, idle with nothing queued: takes the socket (closes the
 * loop's gate, so the next input wakes this thread and not the loop, a
 * hop less per call), drains it and returns the fd to wait on, -1 when it
 * may not take it (no READY yet, a message left to the loop, a reset), or
 * -2 when its drain stopped at its bound (drain again before waiting). */
static int s_take_socket(s_worker *w, uint64_t *owned)
{
    int zfd = -1;
    pthread_mutex_lock(&w->smu);
    if (*owned && (*owned != w->generation || !w->watch))
        *owned = 0; /* the connection was reset: its gate went with it */
    if (w->direct && w->sock && w->watch && !w->has_fwd && !w->stopping) {
        if (!*owned && rl_zuv_gate(w->watch, 0) == RL_OK)
            *owned = w->generation;
        if (*owned) {
            int n = 0;
            while (n < 256 && s_recv_direct(w)) /* bounded, as the loop's drains */
                n++;
            if (n == 256) {
                zfd = -2; /* more may be queued: drain again before waiting */
            } else if (w->has_fwd) { /* not a call: the loop handles it, then the rest */
                s_give_socket_locked(w, owned);
                uv_async_send(&w->done_async);
            } else {
                zfd = rl_zuv_fd(w->watch);
            }
        }
    } else {
        s_give_socket_locked(w, owned);
    }
    pthread_mutex_unlock(&w->smu);
    return zfd;
}

static void *s_compute_main(void *arg)
{
    s_worker *w = arg;
    s_compute_thread = 1;
    uint64_t owned = 0; /* the connection whose socket this thread took, or 0 */
    for (;;) {
        pthread_mutex_lock(&w->mu);
        s_task *t = s_pop(&w->todo);
        int quit = w->compute_quit;
        if (t) {
            w->m_queued--;
            w->m_busy = 1;
        }
        pthread_mutex_unlock(&w->mu);
        if (!t && quit)
            break; /* quit with an empty queue */
        if (!t) {
            int zfd = s_take_socket(w, &owned);
            pthread_mutex_lock(&w->mu);
            int more = w->todo.head || w->compute_quit || zfd == -2;
            pthread_mutex_unlock(&w->mu);
            if (more)
                continue;
            struct pollfd p[2] = {{.fd = w->wake_fd, .events = POLLIN},
                                  {.fd = zfd, .events = POLLIN}};
            if (poll(p, zfd >= 0 ? 2 : 1, -1) > 0 && (p[0].revents & POLLIN)) {
                uint64_t v;
                ssize_t r = read(w->wake_fd, &v, sizeof v);
                (void)r;
            }
            continue;
        }
        if (owned) {
            /* the loop receives while the handler runs: heartbeats, aborts */
            pthread_mutex_lock(&w->smu);
            s_give_socket_locked(w, &owned);
            pthread_mutex_unlock(&w->smu);
        }
        rl_error_clear();
        switch (t->kind) {
        case S_TASK_INIT:
            rl_abort_scope_set(t->abort_epoch);
            t->rc = w->role->init ? w->role->init(&w->ctx) : RL_OK;
            rl_abort_scope_set(0);
            break;
        case S_TASK_FINI:
            if (w->role->fini)
                w->role->fini(&w->ctx);
            t->rc = RL_OK;
            break;
        case S_TASK_CALL: s_run_call(w, t); break;
        }
        if (t->rc)
            snprintf(t->error, sizeof t->error, "%s", rl_error_message());
        if (t->kind == S_TASK_CALL) {
            s_reply(w, t); /* from this thread: no hop through the loop */
            s_call_done(w, t);
            continue;
        }
        pthread_mutex_lock(&w->mu);
        s_push(&w->done, t);
        w->m_busy = 0;
        pthread_mutex_unlock(&w->mu);
        uv_async_send(&w->done_async);
    }
    if (owned) {
        pthread_mutex_lock(&w->smu);
        s_give_socket_locked(w, &owned);
        pthread_mutex_unlock(&w->smu);
    }
    return NULL;
}

static void s_submit(s_worker *w, s_task *t)
{
    pthread_mutex_lock(&w->mu);
    s_push(&w->todo, t);
    w->m_queued++;
    pthread_mutex_unlock(&w->mu);
    if (s_compute_thread)
        return; /* its own drain (s_take_socket): it looks at the queue next */
    if (w->draining) {
        /* inside a drain the loop holds smu, which the compute thread needs
         * for its reply: wake it when the drain lets go (s_unlock_sock), or
         * it would run, block on smu and need a second wake-up */
        w->wake_compute = 1;
        return;
    }
    s_wake_compute(w);
}

/* ---- sending -------------------------------------------------------------------------- */

/* Any thread; takes smu. On the compute thread the loop is not kicked here:
 * s_reply wakes it when the send left input pending. */
static int s_send(s_worker *w, Rl__Envelope *env, const rl_dataproto *payload)
{
    pthread_mutex_lock(&w->smu);
    if (!w->sock) {
        pthread_mutex_unlock(&w->smu);
        return RL_ESTATE;
    }
    env->seq = ++w->seq;
    int rc = rl_msg_send(w->sock, NULL, 0, env, payload);
    if (rc) {
        rl_log_warn("send %s failed: %s", rl_msg_kind_name(env->body_case), rl_error_message());
    } else {
        /* the monotonic clock in ms, as uv_now (which only the loop may read) */
        w->last_send = uv_hrtime() / 1000000;
        size_t n = rl_msg_size(env, payload);
        pthread_mutex_lock(&w->mu);
        w->m_bytes_out += (int64_t)n;
        pthread_mutex_unlock(&w->mu);
    }
    if (!s_compute_thread)
        rl_zuv_kick(w->watch);
    pthread_mutex_unlock(&w->smu);
    return rc;
}

static void s_send_error(s_worker *w, uint64_t call_id, int code, const char *message)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Error err = RL__ERROR__INIT;
    err.call_id = call_id;
    err.code = code;
    err.message = (char *)message;
    env.body_case = RL__ENVELOPE__BODY_ERROR;
    env.error = &err;
    s_send(w, &env, NULL);
}

/* HELLO; with a CHALLENGE's nonce, again with the proof of our token. */
static void s_send_hello(s_worker *w, const uint8_t *nonce, size_t nonce_len)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Hello h = RL__HELLO__INIT;
    char wid[400];
    snprintf(wid, sizeof wid, "%s/%d@%s#%d", w->ctx.role, w->ctx.rank, w->node, (int)getpid());
    char *devices[1] = {"cpu"};
    uint8_t proof[RL_HS_PROOF_BYTES];
    h.role = (char *)w->ctx.role;
    h.rank = (uint32_t)w->ctx.rank;
    h.node = w->node;
    h.pid = (uint32_t)getpid();
    h.n_devices = 1;
    h.devices = devices;
    h.data_endpoint = "";
    h.worker_id = wid;
    h.job_id = w->job_id;
    h.kx_public.data = w->kx_pk;
    h.kx_public.len = sizeof w->kx_pk;
    if (nonce) {
        rl_hs_proof(w->token, nonce, nonce_len, w->job_id, w->ctx.role, (uint32_t)w->ctx.rank,
                    w->routing_id, strlen(w->routing_id), proof);
        h.challenge.data = (uint8_t *)nonce;
        h.challenge.len = nonce_len;
        h.proof.data = proof;
        h.proof.len = sizeof proof;
    }
    env.body_case = RL__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    s_send(w, &env, NULL);
}

/* ---- methods served ---------------------------------------------------------------- */

static const rl_method *s_table_find(const rl_method *t, const char *name)
{
    for (const rl_method *m = t; m && m->name; m++)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

/* RL_WORKER_DRAIN: nothing, on the compute thread, after every earlier call. */
static int s_drain(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    (void)in;
    *out = rl_dataproto_new();
    return *out ? RL_OK : rl_error_set(RL_ENOMEM, RL_WORKER_DRAIN ": out of memory");
}

static const rl_method s_runtime_methods[] = {{RL_WORKER_DRAIN, s_drain}, {NULL, NULL}};

/* The role's method, else a test method when they are served, else the
 * runtime's own. */
static const rl_method *s_find_method(const s_worker *w, const char *name)
{
    const rl_method *m = s_table_find(w->role->methods, name);
    if (!m)
        m = s_table_find(s_runtime_methods, name);
    if (!m && w->serve_tests)
        m = s_table_find(w->opt.test_methods, name);
    return m;
}

/* Calls fn(name, arg) for every method served, each name once. */
static void s_each_method(const s_worker *w, void (*fn)(const char *, void *), void *arg)
{
    for (const rl_method *m = w->role->methods; m && m->name; m++)
        fn(m->name, arg);
    if (!w->serve_tests)
        return;
    for (const rl_method *m = w->opt.test_methods; m && m->name; m++)
        if (!s_table_find(w->role->methods, m->name))
            fn(m->name, arg);
}

static int s_in_list(const char *const *list, const char *name)
{
    for (; list && *list; list++)
        if (strcmp(*list, name) == 0)
            return 1;
    return 0;
}

/* `name` is served and declared retry-safe where it comes from (the role's
 * list for a role method, the test list for a test method; the runtime's
 * drain always). */
static int s_is_retry_safe(const s_worker *w, const char *name)
{
    if (strcmp(name, RL_WORKER_DRAIN) == 0)
        return 1; /* a no-op: sent again to a reconnected worker, it still orders */
    if (s_table_find(w->role->methods, name))
        return s_in_list(w->opt.retry_safe, name);
    return w->serve_tests && s_table_find(w->opt.test_methods, name) &&
           s_in_list(w->opt.test_retry_safe, name);
}

/* `name` is served and declared inline where it comes from. */
static int s_is_inline(const s_worker *w, const char *name)
{
    if (!w->opt.inline_methods && !w->opt.test_inline)
        return 0;
    if (s_table_find(w->role->methods, name))
        return s_in_list(w->opt.inline_methods, name);
    return w->serve_tests && s_in_list(w->opt.test_inline, name);
}

typedef struct {
    char **names;
    size_t n;
} s_name_list;

static void s_count_name(const char *name, void *arg)
{
    (void)name;
    ((s_name_list *)arg)->n++;
}

static void s_add_name(const char *name, void *arg)
{
    s_name_list *l = arg;
    l->names[l->n++] = (char *)name;
}

static void s_send_ready(s_worker *w)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Ready r = RL__READY__INIT;
    s_name_list l = {NULL, 0};
    s_each_method(w, s_count_name, &l);
    l.names = calloc(l.n ? l.n : 1, sizeof *l.names);
    if (!l.names) {
        s_send_error(w, 0, RL_ENOMEM, "READY: out of memory");
        return;
    }
    l.n = 0;
    s_each_method(w, s_add_name, &l);
    r.n_methods = l.n;
    r.methods = l.names;
    char **safe = calloc(l.n ? l.n : 1, sizeof *safe);
    if (!safe) {
        free(l.names);
        s_send_error(w, 0, RL_ENOMEM, "READY: out of memory");
        return;
    }
    for (size_t i = 0; i < l.n; i++)
        if (s_is_retry_safe(w, l.names[i]))
            safe[r.n_retry_safe++] = l.names[i];
    r.retry_safe = safe;
    env.body_case = RL__ENVELOPE__BODY_READY;
    env.ready = &r;
    s_send(w, &env, NULL);
    free(l.names);
    free(safe);
    w->ready_sent = 1;
    pthread_mutex_lock(&w->smu);
    w->direct = w->sock != NULL && !w->stopping; /* the idle compute thread may take it */
    pthread_mutex_unlock(&w->smu);
    s_wake_compute(w);
    pthread_mutex_lock(&w->mu);
    w->m_connected = 1;
    pthread_mutex_unlock(&w->mu);
    if (w->opt.sd_notify)
        rl_sd_notify("STATUS=serving");
}

/* ---- connection --------------------------------------------------------------------- */

static int s_on_readable(void *sock, void *arg);

static void s_close_socket(s_worker *w)
{
    pthread_mutex_lock(&w->smu);
    if (w->watch)
        rl_zuv_stop(w->watch);
    w->watch = NULL;
    if (w->sock)
        zmq_close(w->sock);
    w->sock = NULL;
    w->direct = 0;
    if (w->has_fwd) { /* of the connection just closed */
        rl_msg_clear(&w->fwd);
        w->has_fwd = 0;
    }
    pthread_mutex_unlock(&w->smu);
    s_wake_compute(w); /* it may wait on that socket's fd: it must let go */
}

/* The drain's lock hooks (the loop's thread). */
static void s_lock_sock(void *arg)
{
    s_worker *w = arg;
    pthread_mutex_lock(&w->smu);
    w->draining = 1;
}

static void s_unlock_sock(void *arg)
{
    s_worker *w = arg;
    w->draining = 0;
    pthread_mutex_unlock(&w->smu);
    if (w->wake_compute) {
        w->wake_compute = 0;
        s_wake_compute(w);
    }
}

static int s_connect_locked(s_worker *w);

static int s_connect(s_worker *w)
{
    pthread_mutex_lock(&w->smu);
    int rc = s_connect_locked(w);
    pthread_mutex_unlock(&w->smu);
    return rc;
}

static int s_connect_locked(s_worker *w)
{
    w->sock = zmq_socket(w->zctx, ZMQ_DEALER);
    if (!w->sock)
        return rl_error_set(RL_EIO, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int linger = 0;
    zmq_setsockopt(w->sock, ZMQ_LINGER, &linger, sizeof linger);
    w->generation++;
    snprintf(w->routing_id, sizeof w->routing_id, "%.64s/%d#%d.%llu", w->ctx.role, w->ctx.rank,
             (int)getpid(), (unsigned long long)w->generation);
    zmq_setsockopt(w->sock, ZMQ_ROUTING_ID, w->routing_id, strlen(w->routing_id));
    rl_hs_kx_keypair(w->kx_pk, w->kx_sk); /* fresh per connection */
    rl_net_limits(w->sock);
    if (w->driver_key[0] && rl_net_curve_client(w->sock, w->driver_key)) {
        int rc = rl_error_wrap(rl_error_code(), "worker");
        zmq_close(w->sock);
        w->sock = NULL;
        return rc;
    }
    if (zmq_connect(w->sock, w->opt.driver) != 0) {
        int rc = rl_error_set(RL_EINVAL, "cannot connect to driver '%s': %s", w->opt.driver,
                              zmq_strerror(zmq_errno()));
        zmq_close(w->sock);
        w->sock = NULL;
        return rc;
    }
    w->watch = rl_zuv_start_gated(&w->loop, w->sock, s_on_readable, w, s_lock_sock, s_unlock_sock);
    w->ready_sent = 0;
    w->accepted = 0;
    w->last_recv = uv_now(&w->loop);
    pthread_mutex_lock(&w->mu);
    w->m_connected = 0;
    pthread_mutex_unlock(&w->mu);
    s_send_hello(w, NULL, 0);
    return RL_OK;
}

static void s_stop(s_worker *w, int code, const char *why)
{
    if (w->stopping)
        return;
    pthread_mutex_lock(&w->smu); /* no call taken by the compute thread after this */
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_mutex_unlock(&w->mu);
    w->direct = 0;
    pthread_mutex_unlock(&w->smu);
    s_wake_compute(w);
    w->exit_code = code;
    w->ctx.stop = 1;
    rl_abort_raise(why); /* a call waiting for a peer returns now */
    rl_log_info("stopping: %s", why);
    if (w->opt.sd_notify)
        rl_sd_notify("STOPPING=1");
    uv_stop(&w->loop);
}

static void s_on_reconnect(uv_timer_t *t)
{
    s_worker *w = t->data;
    if (w->stopping)
        return;
    if (s_connect(w))
        rl_log_error("%s", rl_error_message());
}

static void s_driver_lost(s_worker *w, const char *why)
{
    uint64_t now = uv_now(&w->loop);
    if (!w->lost_since)
        w->lost_since = now;
    uint64_t give_up = (uint64_t)w->opt.give_up_ms;
    if (!w->configured && (uint64_t)w->opt.start_window_ms > give_up)
        give_up = (uint64_t)w->opt.start_window_ms; /* a driver still starting the job */
    if (now - w->lost_since >= give_up) {
        rl_log_error("no driver at %s for %.1f s; giving up", w->opt.driver,
                     (double)(now - w->lost_since) / 1000.0);
        s_stop(w, 2, "driver unreachable");
        return;
    }
    rl_log_warn("%s; reconnecting to %s in %d ms", why, w->opt.driver, w->backoff_ms);
    /* the driver counts this worker dead too (the same liveness): the
     * calls in flight are lost, and a wait of theirs ends now */
    char reason[200];
    snprintf(reason, sizeof reason, "this worker lost the driver (%s)", why);
    rl_abort_raise(reason);
    if (w->opt.sd_notify)
        rl_sd_notify("STATUS=driver lost; reconnecting");
    pthread_mutex_lock(&w->mu);
    w->m_reconnects++;
    pthread_mutex_unlock(&w->mu);
    s_close_socket(w);
    uv_timer_start(&w->reconnect_timer, s_on_reconnect, (uint64_t)w->backoff_ms, 0);
    w->backoff_ms *= 2;
    if (w->backoff_ms > 32 * w->opt.heartbeat_ms)
        w->backoff_ms = 32 * w->opt.heartbeat_ms;
}

/* ---- incoming ----------------------------------------------------------------------------- */

static void s_on_heartbeat(uv_timer_t *t);

/* An integer of CONFIGURE.extra in [lo, hi]; `def` when absent. */
static int s_extra_int(const json_t *extra, const char *key, int def, int lo, int hi, int *out)
{
    const json_t *v = json_object_get(extra, key);
    if (!v) {
        *out = def;
        return RL_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return rl_error_set(RL_EPROTO, "CONFIGURE: extra.%s must be an integer in [%d, %d]", key,
                            lo, hi);
    *out = (int)json_integer_value(v);
    return RL_OK;
}

/* Parses the job tree of the first CONFIGURE and applies its locations, so
 * that a role's config errors name the job file, not "<driver config>". */
static rl_config *s_parse_config(const Rl__Configure *c)
{
    if (c->config_format && c->config_format[0] && strcmp(c->config_format, "json") != 0 &&
        strcmp(c->config_format, "yaml") != 0) {
        rl_error_set(RL_EPROTO, "CONFIGURE: unknown config_format '%.32s'", c->config_format);
        return NULL;
    }
    rl_config *cfg = c->config.len
                         ? rl_config_parse_string((const char *)c->config.data, c->config.len,
                                                  "<driver config>")
                         : rl_config_new("<driver config>");
    /* file:line:col of the job file (best effort: the values are what count) */
    if (cfg && c->locations.len &&
        rl_config_apply_locations(cfg, (const char *)c->locations.data, c->locations.len))
        rl_log_warn("CONFIGURE: config locations ignored: %s", rl_error_message());
    return cfg;
}

static void s_on_configure(s_worker *w, const Rl__Configure *c)
{
    rl_error_clear();
    w->accepted = 1;
    json_t *extra = c->extra ? rl_value_to_json(c->extra, 0) : json_object();
    int world = 1, rank = w->ctx.rank, tests = 0, rc = RL_OK;
    if (!extra && c->extra) /* the message names the bad value; never rc 0 */
        rc = rl_error_code() ? rl_error_wrap(rl_error_code(), "CONFIGURE: extra")
                             : rl_error_set(RL_EPROTO, "CONFIGURE: extra: not convertible");
    else if (!extra)
        rc = rl_error_set(RL_ENOMEM, "CONFIGURE: out of memory");
    else if (!json_is_object(extra))
        rc = rl_error_set(RL_EPROTO, "CONFIGURE: extra must be a map");
    if (!rc)
        rc = s_extra_int(extra, "world_size", 1, 1, 1 << 20, &world);
    if (!rc)
        rc = s_extra_int(extra, "rank", w->ctx.rank, 0, world - 1, &rank);
    if (!rc && rank != w->ctx.rank)
        rc = rl_error_set(RL_EPROTO, "CONFIGURE for rank %d sent to %s/%d", rank, w->ctx.role,
                          w->ctx.rank);
    const json_t *t = extra ? json_object_get(extra, "test_methods") : NULL;
    if (!rc && t && !json_is_boolean(t))
        rc = rl_error_set(RL_EPROTO, "CONFIGURE: extra.test_methods must be a boolean");
    tests = json_is_true(t);
    if (!rc && c->job_id && c->job_id[0] && w->job_id[0] && strcmp(c->job_id, w->job_id) != 0)
        rc = rl_error_set(RL_EPROTO, "CONFIGURE of job %.40s, but this worker belongs to job %s",
                          c->job_id, w->job_id);
    if (!rc && c->job_id && strlen(c->job_id) >= sizeof w->job_id)
        rc = rl_error_set(RL_EPROTO, "CONFIGURE: job id of %zu characters, at most %zu",
                          strlen(c->job_id), sizeof w->job_id - 1);
    char token[RL_HS_TOKEN_HEX + 1] = "";
    if (!rc && c->kx_public.len && /* the driver gives us a free slot */
        rl_hs_kx_worker(w->kx_pk, w->kx_sk, c->kx_public.data, c->kx_public.len, token))
        rc = rl_error_code();
    if (!rc && c->max_message_bytes &&
        (c->max_message_bytes < 1024 || c->max_message_bytes > ((uint64_t)1 << 40)))
        rc = rl_error_set(RL_EPROTO, "CONFIGURE: max_message_bytes %llu outside [1024, 2^40]",
                          (unsigned long long)c->max_message_bytes);
    const json_t *keys = extra ? json_object_get(extra, "authorized_keys") : NULL;
    if (!rc && keys) {
        size_t nk = json_array_size(keys);
        const char **list = calloc(nk ? nk : 1, sizeof *list);
        if (!json_is_array(keys) || nk > 100000 || !list)
            rc = rl_error_set(RL_EPROTO, "CONFIGURE: extra.authorized_keys must be a list of keys");
        for (size_t i = 0; !rc && i < nk; i++)
            if (!(list[i] = json_string_value(json_array_get(keys, i))))
                rc = rl_error_set(RL_EPROTO, "CONFIGURE: authorized key %zu is not a string", i);
        if (!rc && rl_net_secure())
            rc = rl_net_set_allowed(list, (int)nk);
        free((void *)list);
    }
    json_decref(extra);
    if (!rc && (c->heartbeat_ms > 3600000 || c->liveness > 1000))
        rc = rl_error_set(RL_EPROTO, "CONFIGURE: heartbeat %u ms x %u is out of range",
                          c->heartbeat_ms, c->liveness);
    rl_config *cfg = NULL;
    if (!rc && !w->configured && !(cfg = s_parse_config(c)))
        rc = rl_error_code();
    if (rc) {
        rl_log_error("%s", rl_error_message());
        s_send_error(w, 0, rc, rl_error_message());
        return;
    }
    if (c->job_id && c->job_id[0])
        snprintf(w->job_id, sizeof w->job_id, "%s", c->job_id);
    if (token[0])
        snprintf(w->token, sizeof w->token, "%s", token);
    if (c->give_up_ms)
        w->opt.give_up_ms = (int)(c->give_up_ms < 2000000000u ? c->give_up_ms : 2000000000u);
    if (c->max_message_bytes)
        rl_net_set_max_message((int64_t)c->max_message_bytes);
    if (c->heartbeat_ms)
        w->opt.heartbeat_ms = (int)c->heartbeat_ms;
    if (c->liveness)
        w->opt.liveness = (int)c->liveness;
    /* restart (not just set_repeat): the new period applies at once */
    uv_timer_start(&w->hb_timer, s_on_heartbeat, (uint64_t)w->opt.heartbeat_ms,
                   (uint64_t)w->opt.heartbeat_ms);
    w->serve_tests = tests && w->opt.test_methods;
    if (w->configured) {
        s_send_ready(w); /* reconnect: already initialised with the first tree */
        return;
    }
    s_task *task = calloc(1, sizeof *task);
    if (!task) {
        rl_config_free(cfg);
        s_send_error(w, 0, RL_ENOMEM, "CONFIGURE: out of memory");
        return;
    }
    /* set before the compute thread starts using them; fixed afterwards */
    w->ctx.config = cfg;
    w->ctx.world_size = world;
    w->configured = 1;
    task->kind = S_TASK_INIT;
    task->generation = w->generation;
    task->abort_epoch = rl_abort_epoch();
    s_submit(w, task); /* READY goes out when init is done */
}

/* CHALLENGE: the slot is held; prove we hold its token (never send it). */
static void s_on_challenge(s_worker *w, const Rl__Challenge *c)
{
    if (c->nonce.len != RL_HS_NONCE_BYTES) {
        rl_log_error("CHALLENGE: nonce of %zu bytes, expected %d; ignored", c->nonce.len,
                     RL_HS_NONCE_BYTES);
        return;
    }
    if (!w->token[0] && !w->configured) {
        /* an external worker that never had its CONFIGURE: the holder may
         * be its own earlier connection, whose claim the driver answered
         * too late (hundreds of workers starting on a busy driver). The
         * driver frees that slot when the old connection's heartbeats are
         * missed: claim it again then (give_up bounds the tries). */
        s_driver_lost(w, "the slot is held (by this worker's own earlier connection, or by "
                         "another worker)");
        return;
    }
    if (!w->token[0]) {
        rl_log_error("the driver asks for proof of the slot token of %s/%d, which this worker "
                     "does not have (the slot is held by another worker)", w->ctx.role,
                     w->ctx.rank);
        s_stop(w, 1, "refused by the driver");
        return;
    }
    s_send_hello(w, c->nonce.data, c->nonce.len);
}

typedef struct {
    char *buf;
    size_t n, size;
} s_known;

/* Appends " name" while it fits (leaving room for the closing paren). */
static void s_known_add(const char *name, void *arg)
{
    s_known *k = arg;
    if (k->n + strlen(name) + 8 < k->size)
        k->n += (size_t)snprintf(k->buf + k->n, k->size - k->n, " %s", name);
}

/* RL_WORKER_ABORT, on the loop's thread whatever the compute thread does:
 * the waits of every call that arrived before it end (abort.h); answered
 * at once unless call_id is 0. meta "why" (a string) is the reason. */
static void s_on_abort(s_worker *w, uint64_t call_id, const rl_dataproto *in)
{
    const json_t *v = in ? json_object_get(rl_dataproto_meta_const(in), "why") : NULL;
    char why[300];
    snprintf(why, sizeof why, "the driver: %.200s",
             json_is_string(v) ? json_string_value(v) : "a peer of this call was lost");
    pthread_mutex_lock(&w->mu);
    int busy = w->m_busy || w->todo.head;
    pthread_mutex_unlock(&w->mu);
    rl_abort_raise(why);
    if (busy)
        rl_log_warn("aborting the waits of the calls in flight: %s", why);
    if (call_id == 0)
        return;
    static const rl_method abort_method = {RL_WORKER_ABORT, NULL};
    s_task t = {.kind = S_TASK_CALL, .call_id = call_id, .generation = w->generation,
                .method = &abort_method};
    s_reply(w, &t);
}

static void s_on_call(s_worker *w, rl_msg *m)
{
    const Rl__Call *c = m->env->call;
    if (m->payload_error) {
        char buf[1200];
        snprintf(buf, sizeof buf, "bad payload for call '%s': %s", c->method, rl_error_message());
        s_send_error(w, c->call_id, m->payload_error, buf);
        return;
    }
    if (c->has_payload != (m->payload != NULL)) { /* as the driver checks a REPLY */
        char buf[400];
        snprintf(buf, sizeof buf, "call '%.200s' %s a payload but %s", c->method ? c->method : "",
                 c->has_payload ? "announces" : "has", c->has_payload ? "none came" : "does not announce it");
        s_send_error(w, c->call_id, RL_EPROTO, buf);
        return;
    }
    if (c->method && strcmp(c->method, RL_WORKER_ABORT) == 0) {
        s_on_abort(w, c->call_id, m->payload);
        return;
    }
    const rl_method *method = c->method ? s_find_method(w, c->method) : NULL;
    if (!method) {
        char buf[1024];
        s_known k = {buf, 0, sizeof buf};
        k.n = (size_t)snprintf(buf, sizeof buf, "unknown method '%.200s' for role %s (known:",
                               c->method ? c->method : "", w->ctx.role);
        s_each_method(w, s_known_add, &k);
        snprintf(buf + k.n, sizeof buf - k.n, ")");
        s_send_error(w, c->call_id, RL_ENOTFOUND, buf);
        return;
    }
    /* Small keyword args travel as meta: a map, every value convertible, or
     * the call is refused (never run with the args silently dropped). */
    json_t *args = NULL;
    if (c->args) {
        int rc = RL_OK;
        rl_error_clear();
        args = rl_value_to_json(c->args, 0);
        if (!args)
            rc = rl_error_code() ? rl_error_code()
                                 : rl_error_set(RL_EPROTO, "value: not convertible");
        else if (!json_is_object(args))
            rc = rl_error_set(RL_EPROTO, "expected a map, got a %s",
                              json_is_array(args) ? "list" : "scalar");
        if (rc) {
            char buf[1200];
            snprintf(buf, sizeof buf, "bad args for call '%.200s': %s", c->method,
                     rl_error_message());
            json_decref(args);
            s_send_error(w, c->call_id, rc, buf);
            return;
        }
    }
    s_task *t = calloc(1, sizeof *t);
    rl_dataproto *in = m->payload ? m->payload : rl_dataproto_new();
    if (!t || !in) {
        free(t);
        if (in != m->payload)
            rl_dataproto_free(in);
        json_decref(args);
        s_send_error(w, c->call_id, RL_ENOMEM, "call: out of memory");
        return;
    }
    t->kind = S_TASK_CALL;
    t->call_id = c->call_id;
    t->generation = w->generation;
    t->abort_epoch = rl_abort_epoch();
    t->method = method;
    t->in = in;
    m->payload = NULL;
    if (args) {
        json_object_update(rl_dataproto_meta(t->in), args);
        json_decref(args);
    }
    if (!s_compute_thread && s_is_inline(w, method->name)) {
        /* An inline method (declared cheap by its role) runs right here on
         * the loop when the compute thread is idle with nothing queued: the
         * order of calls is kept and the hop to the compute thread saved.
         * Only the loop queues work, so idle stays true while it runs. */
        pthread_mutex_lock(&w->mu);
        int idle = !w->todo.head && !w->m_busy;
        if (idle)
            w->m_busy = 1;
        pthread_mutex_unlock(&w->mu);
        if (idle) {
            rl_error_clear();
            s_run_call(w, t);
            if (t->rc)
                snprintf(t->error, sizeof t->error, "%s", rl_error_message());
            s_reply(w, t);
            s_call_done(w, t);
            return;
        }
    }
    s_submit(w, t);
}

/* Bookkeeping of a message received (either thread, under smu). */
static void s_note_recv(s_worker *w, const rl_msg *m)
{
    /* the loop's cached clock on the loop; the monotonic clock in ms (the
     * same clock, maybe a little ahead) on the compute thread */
    w->last_recv = s_compute_thread ? uv_hrtime() / 1000000 : uv_now(&w->loop);
    w->lost_since = 0;
    w->backoff_ms = w->opt.heartbeat_ms;
    pthread_mutex_lock(&w->mu);
    w->m_bytes_in += (int64_t)m->bytes;
    w->m_last_recv_ms = w->last_recv;
    pthread_mutex_unlock(&w->mu);
}

/* Compute thread, socket taken, under smu: receives one message. A call
 * (but an abort) is queued and a heartbeat noted here; anything else is
 * left to the loop in w->fwd. 1 when a message was handled here, else 0
 * (EAGAIN, or a message left to the loop). */
static int s_recv_direct(s_worker *w)
{
    rl_msg m;
    int rc = rl_msg_recv(w->sock, 0, &m);
    if (rc && m.bytes == 0)
        return 0;
    s_note_recv(w, &m);
    if (!m.env) {
        rl_log_warn("dropped a message from the driver: %s", rl_error_message());
        rl_msg_clear(&m);
        return 1;
    }
    if (m.env->protocol_version == RL_PROTOCOL_VERSION) {
        if (m.env->body_case == RL__ENVELOPE__BODY_HEARTBEAT) {
            rl_msg_clear(&m);
            return 1;
        }
        if (m.env->body_case == RL__ENVELOPE__BODY_CALL &&
            !(m.env->call->method && strcmp(m.env->call->method, RL_WORKER_ABORT) == 0)) {
            s_on_call(w, &m);
            rl_msg_clear(&m);
            return 1;
        }
    }
    w->fwd = m; /* whole, in order: the loop takes it before its next receive */
    w->has_fwd = 1;
    return 0;
}

/* The loop, under smu: handles the message the compute thread left. */
static void s_take_fwd(s_worker *w)
{
    if (!w->has_fwd)
        return;
    rl_msg m = w->fwd;
    w->has_fwd = 0;
    memset(&w->fwd, 0, sizeof w->fwd);
    s_dispatch(w, &m);
}

/* 0 when nothing was there to receive, else 1 (see rl_zuv_readable_fn). */
static int s_on_readable(void *sock, void *arg)
{
    s_worker *w = arg;
    if (w->has_fwd) { /* received by the compute thread before what is queued */
        s_take_fwd(w);
        return 1;
    }
    rl_msg m;
    int rc = rl_msg_recv(sock, 0, &m);
    if (rc && m.bytes == 0) /* EAGAIN: drained (or a socket error: nothing read) */
        return 0;
    s_note_recv(w, &m);
    return s_dispatch(w, &m);
}

/* Handles a received message m (the loop, under smu); clears it. */
static int s_dispatch(s_worker *w, rl_msg *m_)
{
    rl_msg m = *m_;
    memset(m_, 0, sizeof *m_);
    if (!m.env) {
        rl_log_warn("dropped a message from the driver: %s", rl_error_message());
        rl_msg_clear(&m);
        return 1;
    }
    if (m.env->protocol_version != RL_PROTOCOL_VERSION) {
        rl_log_error("driver speaks protocol version %u, this worker speaks %d",
                     m.env->protocol_version, RL_PROTOCOL_VERSION);
        rl_msg_clear(&m);
        s_stop(w, 1, "protocol version mismatch");
        return 1;
    }
    switch (m.env->body_case) {
    case RL__ENVELOPE__BODY_CONFIGURE: s_on_configure(w, m.env->configure); break;
    case RL__ENVELOPE__BODY_CHALLENGE: s_on_challenge(w, m.env->challenge); break;
    case RL__ENVELOPE__BODY_CALL: s_on_call(w, &m); break;
    case RL__ENVELOPE__BODY_HEARTBEAT: break;
    case RL__ENVELOPE__BODY_SHUTDOWN:
        s_stop(w, 0, m.env->shutdown->reason[0] ? m.env->shutdown->reason : "SHUTDOWN from driver");
        break;
    case RL__ENVELOPE__BODY_ERROR:
        rl_log_error("driver: %s", m.env->error->message);
        break;
    case RL__ENVELOPE__BODY_DISCONNECT:
        rl_log_warn("driver disconnected us: %s", m.env->disconnect->reason);
        if (strstr(m.env->disconnect->reason, "refused")) {
            s_stop(w, 1, "refused by the driver");
        } else {
            /* forget the session and register again */
            s_close_socket(w);
            uv_timer_start(&w->reconnect_timer, s_on_reconnect, (uint64_t)w->backoff_ms, 0);
        }
        break;
    default:
        rl_log_warn("unexpected %s from the driver", rl_msg_kind_name(m.env->body_case));
    }
    rl_msg_clear(&m);
    return 1;
}

/* ---- loop callbacks ------------------------------------------------------------------------ */

static void s_on_done(uv_async_t *a)
{
    s_worker *w = a->data;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        s_task *t = s_pop(&w->done);
        pthread_mutex_unlock(&w->mu);
        if (!t)
            break;
        if (t->kind == S_TASK_INIT) {
            if (t->rc) {
                rl_log_error("role init failed: %s", t->error);
                s_send_error(w, 0, t->rc, t->error);
                s_stop(w, 1, "role init failed");
            } else if (w->sock) {
                s_send_ready(w);
            }
        }
        rl_dataproto_free(t->in);
        rl_dataproto_free(t->out);
        free(t);
    }
    /* the compute thread's reply may have taken the socket's edge, or it
     * left a message to the loop */
    pthread_mutex_lock(&w->smu);
    s_take_fwd(w);
    rl_zuv_kick(w->watch);
    pthread_mutex_unlock(&w->smu);
}

/* Compute thread: REPLY or ERROR for call task t, sent from this thread
 * under smu (dropped when the connection was reset since the call came). */
static void s_reply(s_worker *w, s_task *t)
{
    pthread_mutex_lock(&w->smu);
    if (t->generation != w->generation || !w->sock) {
        rl_log_warn("dropping the result of call %llu (%s): connection was reset",
                    (unsigned long long)t->call_id, t->method->name);
    } else if (t->rc) {
        s_send_error(w, t->call_id, t->rc, t->error);
    } else {
        Rl__Envelope env = RL__ENVELOPE__INIT;
        Rl__Reply r = RL__REPLY__INIT;
        r.call_id = t->call_id;
        r.has_payload = t->out != NULL;
        /* the handler's time: the driver separates it from dispatch and
         * transfer overhead */
        Rl__Value cs = RL__VALUE__INIT, res = RL__VALUE__INIT;
        Rl__MapEntry e = RL__MAP_ENTRY__INIT, *ep = &e;
        Rl__MapValue map = RL__MAP_VALUE__INIT;
        cs.kind_case = RL__VALUE__KIND_DOUBLE_VALUE;
        cs.double_value = t->compute_s;
        e.key.data = (uint8_t *)"compute_s";
        e.key.len = 9;
        e.value = &cs;
        map.n_entries = 1;
        map.entries = &ep;
        res.kind_case = RL__VALUE__KIND_MAP_VALUE;
        res.map_value = &map;
        r.result = &res; /* on the stack: no JSON, no allocation per reply */
        env.body_case = RL__ENVELOPE__BODY_REPLY;
        env.reply = &r;
        if (s_send(w, &env, t->out) == RL_EPROTO)
            s_send_error(w, t->call_id, RL_EPROTO, rl_error_message());
    }
    /* the loop (an inline call) is inside its drain, which ends with an
     * EAGAIN receive: only the compute thread must look for a lost edge */
    int pending = 0;
    if (s_compute_thread && w->sock) {
        /* idle next with the socket its own, this thread drains it itself
         * (s_take_socket): no ZMQ_EVENTS query */
        pthread_mutex_lock(&w->mu);
        int idle_next = w->direct && !w->has_fwd && !w->todo.head;
        pthread_mutex_unlock(&w->mu);
        pending = !idle_next && rl_zuv_pending(w->sock);
    }
    pthread_mutex_unlock(&w->smu);
    if (pending)
        uv_async_send(&w->done_async); /* s_on_done kicks the drain */
}

/* The loop runs (timers, signals and the socket are served) and the driver
 * is heard or still being waited for: tell systemd's watchdog. */
static void s_on_watchdog(uv_timer_t *t)
{
    s_worker *w = t->data;
    if (!w->stopping && w->opt.sd_notify)
        rl_sd_notify("WATCHDOG=1");
}

static void s_on_heartbeat_locked(s_worker *w);

static void s_on_heartbeat(uv_timer_t *t)
{
    s_worker *w = t->data;
    pthread_mutex_lock(&w->smu);
    s_on_heartbeat_locked(w);
    pthread_mutex_unlock(&w->smu);
}

static void s_on_heartbeat_locked(s_worker *w)
{
    if (!w->sock || w->stopping)
        return;
    uint64_t now = uv_now(&w->loop);
    uint64_t limit = (uint64_t)w->opt.heartbeat_ms * (uint64_t)w->opt.liveness;
    if (!w->configured && (uint64_t)w->opt.start_window_ms > limit)
        limit = (uint64_t)w->opt.start_window_ms; /* a driver still starting the job */
    /* last_recv may be off the monotonic clock (the compute thread's
     * receives), a little ahead of uv_now: no unsigned wrap-around */
    if (now > w->last_recv && now - w->last_recv > limit) {
        char why[128];
        snprintf(why, sizeof why, "driver silent for %.1f s", (double)(now - w->last_recv) / 1000.0);
        s_driver_lost(w, why);
        return;
    }
    /* last_send is read off the monotonic clock at the send, so it may be a
     * little ahead of the loop's cached uv_now: no unsigned wrap-around */
    if (w->accepted && now >= w->last_send + (uint64_t)w->opt.heartbeat_ms) {
        Rl__Envelope env;
        Rl__Heartbeat hb;
        rl_msg_heartbeat(&env, &hb, uv_hrtime());
        s_send(w, &env, NULL);
    }
}

static void s_on_signal(uv_signal_t *h, int signum)
{
    s_worker *w = h->data;
    if (signum == SIGHUP) { /* the parent-death signal (s_watch_parent) */
        rl_log_warn("the driver (pid %ld) is gone", w->driver_pid);
        s_stop(w, RL_WORKER_EXIT_GAVE_UP, "the driver died");
        return;
    }
    if (w->sock) {
        Rl__Envelope env = RL__ENVELOPE__INIT;
        Rl__Disconnect d = RL__DISCONNECT__INIT;
        d.reason = signum == SIGTERM ? "worker got SIGTERM" : "worker got SIGINT";
        env.body_case = RL__ENVELOPE__BODY_DISCONNECT;
        env.disconnect = &d;
        s_send(w, &env, NULL);
    }
    s_stop(w, 0, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* HTTP (its own thread): /healthz (alive: the driver was heard within the
 * liveness, or is being waited for), /healthz/ready (serving), /metrics. */
static int s_http(void *arg, const char *path, char **body, const char **type)
{
    s_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    int64_t calls = w->m_calls, errors = w->m_errors, bin = w->m_bytes_in, bout = w->m_bytes_out;
    int64_t queued = w->m_queued, reconnects = w->m_reconnects;
    double handler = w->m_handler_s;
    int busy = w->m_busy, ready = w->m_connected && !w->stopping;
    uint64_t last = w->m_last_recv_ms;
    int stopping = w->stopping;
    pthread_mutex_unlock(&w->mu);
    /* uv_now is the loop's cached clock: read the monotonic clock instead */
    uint64_t now = uv_hrtime() / 1000000;
    double since = last ? (double)(now > last ? now - last : 0) / 1000.0 : -1;
    double limit = (double)w->opt.heartbeat_ms * w->opt.liveness / 1000.0;
    int alive = !stopping && (!ready || since < 2 * limit + 1);
    char labels[160];
    snprintf(labels, sizeof labels, "role=\"%s\",rank=\"%d\"", w->ctx.role, w->ctx.rank);
    rl_text t = {0};
    int status = 200;
    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/healthz/ready") == 0) {
        int want_ready = strcmp(path, "/healthz/ready") == 0;
        status = (want_ready ? ready : alive) ? 200 : 503;
        rl_text_printf(&t,
                       "{\"status\": \"%s\", \"role\": \"%s\", \"rank\": %d, \"job\": \"%s\", "
                       "\"ready\": %s, \"stepping\": %s, \"last_heartbeat_s\": %.3f, "
                       "\"queue_depth\": %lld}\n",
                       status == 200 ? "ok" : "unhealthy", w->ctx.role, w->ctx.rank, w->job_id,
                       ready ? "true" : "false", busy ? "true" : "false", since,
                       (long long)queued);
        *type = "application/json";
    } else if (strcmp(path, "/metrics") == 0) {
        uint64_t wv = rl_weight_channel_version();
        rl_text_metric(&t, "rlrt_up", "gauge", "1 while the daemon runs", labels, 1);
        rl_text_metric(&t, "rlrt_ready", "gauge", "1 while serving calls", labels, ready);
        rl_text_metric(&t, "rlrt_calls_total", "counter", "calls handled", labels, (double)calls);
        rl_text_metric(&t, "rlrt_call_errors_total", "counter", "calls answered with an error",
                       labels, (double)errors);
        rl_text_metric(&t, "rlrt_received_bytes_total", "counter", "control-plane bytes in",
                       labels, (double)bin);
        rl_text_metric(&t, "rlrt_sent_bytes_total", "counter", "control-plane bytes out", labels,
                       (double)bout);
        rl_text_metric(&t, "rlrt_handler_seconds_total", "counter", "time spent in handlers",
                       labels, handler);
        rl_text_metric(&t, "rlrt_queue_depth", "gauge", "calls waiting for the compute thread",
                       labels, (double)queued);
        rl_text_metric(&t, "rlrt_busy", "gauge", "1 while a handler runs", labels, busy);
        rl_text_metric(&t, "rlrt_reconnects_total", "counter", "times the driver was lost",
                       labels, (double)reconnects);
        rl_text_metric(&t, "rlrt_aborts_total", "counter",
                       "times the waits of the calls in flight were aborted (a peer or the driver lost)",
                       labels, (double)rl_abort_count());
        rl_text_metric(&t, "rlrt_last_heartbeat_seconds", "gauge",
                       "seconds since the driver was last heard (-1: never)", labels, since);
        rl_text_metric(&t, "rlrt_weight_version", "gauge",
                       "latest weight version this process sent or received (0: none)", labels,
                       (double)wv);
        *type = "text/plain; version=0.0.4";
    } else {
        status = 404;
        rl_text_printf(&t, "not found: %.100s (try /healthz, /healthz/ready, /metrics)\n", path);
    }
    *body = t.failed ? NULL : t.buf;
    if (t.failed)
        free(t.buf);
    return t.failed ? 500 : status;
}

/* Security, job id and token from the options (and RL_WORKER_TOKEN). */
static int s_setup_identity(s_worker *w)
{
    const rl_worker_options *o = &w->opt;
    if (rl_hs_init())
        return rl_error_code();
    if (o->job_id && strlen(o->job_id) >= sizeof w->job_id)
        return rl_error_set(RL_EINVAL, "job id '%.40s...' is too long", o->job_id);
    snprintf(w->job_id, sizeof w->job_id, "%s", o->job_id ? o->job_id : "");
    if (o->token && strlen(o->token) >= sizeof w->token)
        return rl_error_set(RL_EINVAL, "the slot token is too long");
    snprintf(w->token, sizeof w->token, "%s", o->token ? o->token : "");
    if (o->max_message_bytes && rl_net_set_max_message(o->max_message_bytes))
        return rl_error_code();
    /* a certificate alone: CURVE on the worker's channels, and the control
     * plane over its node relay's private Unix socket (relay.h) */
    int relayed = o->driver && strncmp(o->driver, "ipc:///", 7) == 0;
    if (o->driver_key && !o->cert)
        return rl_error_set(RL_EINVAL, "security needs the worker's certificate with the "
                            "driver's public key");
    if (o->cert && !o->driver_key && !relayed)
        return rl_error_set(RL_EINVAL, "security needs both the worker's certificate and the "
                            "driver's public key (only a worker behind a node relay, whose "
                            "--driver is ipc:///PATH, goes without the key)");
    if (o->cert) {
        rl_net_keypair own;
        int rc = rl_net_load_cert(o->cert, 1, &own);
        if (!rc)
            rc = rl_net_set_security(&own, NULL, 0);
        memset(&own, 0, sizeof own);
        if (rc)
            return rc;
    }
    if (o->driver_key) {
        if (strlen(o->driver_key) != 40)
            return rl_error_set(RL_EINVAL, "the driver key must be 40 Z85 characters, got %zu",
                                strlen(o->driver_key));
        snprintf(w->driver_key, sizeof w->driver_key, "%s", o->driver_key);
    }
    return RL_OK;
}

/* A worker the driver spawned (RL_DRIVER_PID, set by the launcher) asks the
 * kernel for SIGHUP when the driver dies (when the driver's thread that
 * spawned it ends, which is the driver's end), so that an orphan frees its
 * ports at once instead of after the heartbeat liveness and give-up time.
 * 1 when the driver is gone already. */
static int s_watch_parent(s_worker *w)
{
    const char *v = getenv("RL_DRIVER_PID");
    char *end = NULL;
    long pid = v ? strtol(v, &end, 10) : 0;
    unsetenv("RL_DRIVER_PID"); /* not for anything this worker starts */
    if (!v || !end || *end || pid <= 1)
        return 0;
    w->driver_pid = pid;
    if (prctl(PR_SET_PDEATHSIG, SIGHUP) != 0)
        rl_log_warn("prctl(PR_SET_PDEATHSIG): %s; an orphan leaves by its heartbeats",
                    strerror(errno));
    return getppid() != pid; /* it died before the prctl */
}

#define S_HTTP_WAIT_MS 30000 /* for a port held by a previous worker */

/* Serves HTTP on the worker's port; while another socket holds it (the
 * orphan of an earlier driver, leaving), tries again every 250 ms for up
 * to S_HTTP_WAIT_MS instead of failing the worker (a restart spent). */
static void s_on_http_retry(uv_timer_t *t)
{
    s_worker *w = t->data;
    if (w->stopping)
        return;
    if ((w->http = rl_http_start(w->opt.http_bind, w->opt.http_port, s_http, w))) {
        if (w->http_wait_since)
            rl_log_info("http: port %d is free now; HTTP /healthz and /metrics are served "
                        "(waited %.1f s)", w->opt.http_port,
                        (double)(uv_now(&w->loop) - w->http_wait_since) / 1000.0);
        return;
    }
    uint64_t now = uv_now(&w->loop);
    if (rl_error_code() != RL_EEXIST ||
        (w->http_wait_since && now - w->http_wait_since >= S_HTTP_WAIT_MS)) {
        rl_log_error("%s%s", rl_error_message(), w->http_wait_since ? " (gave up waiting)" : "");
        s_stop(w, RL_WORKER_EXIT_ERROR, "cannot serve HTTP");
        return;
    }
    if (!w->http_wait_since) {
        w->http_wait_since = now;
        rl_log_warn("%s; waiting up to %d s for it (an earlier worker of this slot may still "
                    "hold it)", rl_error_message(), S_HTTP_WAIT_MS / 1000);
    }
    uv_timer_start(&w->http_timer, s_on_http_retry, 250, 0);
}

static void s_close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int rl_worker_run(const rl_worker_options *opt_in, const rl_worker_role *role)
{
    if (!opt_in || !role || !opt_in->role || !opt_in->driver || opt_in->rank < 0) {
        rl_error_set(RL_EINVAL, "rl_worker_run: role, driver and a rank >= 0 are required");
        return RL_WORKER_EXIT_ERROR;
    }
    s_worker *w = rl_zalloc(sizeof *w, "worker");
    if (!w)
        return RL_WORKER_EXIT_ERROR;
    w->opt = *opt_in;
    if (w->opt.heartbeat_ms <= 0)
        w->opt.heartbeat_ms = 1000;
    if (w->opt.liveness <= 0)
        w->opt.liveness = 3;
    if (w->opt.give_up_ms <= 0)
        w->opt.give_up_ms = 60000;
    w->backoff_ms = w->opt.heartbeat_ms;
    w->role = role;
    if (w->opt.node && *w->opt.node)
        snprintf(w->node, sizeof w->node, "%s", w->opt.node);
    else if (gethostname(w->node, sizeof w->node - 1) != 0)
        snprintf(w->node, sizeof w->node, "unknown");
    w->ctx.role = w->opt.role;
    w->ctx.rank = w->opt.rank;
    w->ctx.node = w->node;
    w->ctx.world_size = 1;
    s_fault_setup(w->opt.role, w->opt.rank);
    s_announce_setup(w->opt.role, w->opt.rank);
    if (s_watch_parent(w)) {
        rl_error_set(RL_EPEER, "the driver (pid %ld) died before this worker started",
                     w->driver_pid);
        free(w);
        return RL_WORKER_EXIT_GAVE_UP;
    }
    if (s_setup_identity(w)) {
        free(w);
        return RL_WORKER_EXIT_ERROR;
    }

    int rc;
    if ((rc = uv_loop_init(&w->loop)) != 0) {
        rl_error_set(RL_EIO, "worker: uv_loop_init: %s", uv_strerror(rc));
        free(w);
        return RL_WORKER_EXIT_ERROR;
    }
    w->zctx = zmq_ctx_new();
    int sync_ok = pthread_mutex_init(&w->mu, NULL) == 0;
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sync_ok && w->wake_fd < 0) {
        pthread_mutex_destroy(&w->mu);
        sync_ok = 0;
    }
    pthread_mutexattr_t rec;
    if (sync_ok && (pthread_mutexattr_init(&rec) != 0 ||
                    pthread_mutexattr_settype(&rec, PTHREAD_MUTEX_RECURSIVE) != 0 ||
                    pthread_mutex_init(&w->smu, &rec) != 0)) {
        pthread_mutex_destroy(&w->mu);
        sync_ok = 0; /* the eventfd is closed below */
    }
    if (sync_ok)
        pthread_mutexattr_destroy(&rec);
    if (!w->zctx || !sync_ok) {
        rl_error_set(RL_EIO, "worker: %s", !w->zctx ? "zmq_ctx_new failed" : "mutex/eventfd");
        if (sync_ok) {
            pthread_mutex_destroy(&w->mu);
            pthread_mutex_destroy(&w->smu);
            close(w->wake_fd);
        } else if (w->wake_fd >= 0) {
            close(w->wake_fd);
        }
        if (w->zctx)
            zmq_ctx_term(w->zctx);
        uv_loop_close(&w->loop);
        free(w);
        return RL_WORKER_EXIT_ERROR;
    }
    uv_async_init(&w->loop, &w->done_async, s_on_done);
    uv_timer_init(&w->loop, &w->hb_timer);
    uv_timer_init(&w->loop, &w->reconnect_timer);
    uv_timer_init(&w->loop, &w->wd_timer);
    uv_timer_init(&w->loop, &w->http_timer);
    uv_signal_init(&w->loop, &w->sigterm);
    uv_signal_init(&w->loop, &w->sigint);
    uv_signal_init(&w->loop, &w->sighup);
    w->done_async.data = w->hb_timer.data = w->reconnect_timer.data = w->wd_timer.data =
        w->http_timer.data = w;
    w->sigterm.data = w->sigint.data = w->sighup.data = w;
    uv_signal_start(&w->sigterm, s_on_signal, SIGTERM);
    uv_signal_start(&w->sigint, s_on_signal, SIGINT);
    if (w->driver_pid)
        uv_signal_start(&w->sighup, s_on_signal, SIGHUP);
    int compute_started = 0;
    if ((rc = pthread_create(&w->compute, NULL, s_compute_main, w)) != 0) {
        rl_error_set(RL_EIO, "worker: cannot start the compute thread: %s", strerror(rc));
        rl_log_error("%s", rl_error_message());
        w->exit_code = RL_WORKER_EXIT_ERROR;
    } else if (s_connect(w)) {
        compute_started = 1;
        rl_log_error("%s", rl_error_message());
        w->exit_code = RL_WORKER_EXIT_ERROR;
    } else {
        compute_started = 1;
        if (w->opt.http_port > 0)
            s_on_http_retry(&w->http_timer);
        if (w->stopping) {
            w->exit_code = RL_WORKER_EXIT_ERROR;
        } else {
            uint64_t wd = w->opt.sd_notify ? rl_sd_watchdog_usec() : 0;
            if (wd) { /* pings from the loop: three per WatchdogSec= */
                uv_timer_start(&w->wd_timer, s_on_watchdog, wd / 3000 + 1, wd / 3000 + 1);
                s_on_watchdog(&w->wd_timer);
            }
            uv_timer_start(&w->hb_timer, s_on_heartbeat, (uint64_t)w->opt.heartbeat_ms,
                           (uint64_t)w->opt.heartbeat_ms);
            rl_log_info("connecting to %s%s%s", w->opt.driver,
                        w->driver_key[0] ? " (CurveZMQ)" : "",
                        w->http ? "; HTTP /healthz and /metrics are served" : "");
            if (w->driver_pid && getppid() != w->driver_pid) /* died since s_watch_parent */
                s_stop(w, RL_WORKER_EXIT_GAVE_UP, "the driver died");
            if (w->opt.sd_notify)
                rl_sd_notify("READY=1\nSTATUS=connecting to the driver");
            uv_run(&w->loop, UV_RUN_DEFAULT);
        }
    }

    /* The listening port first: a worker that replaces this one (a new
     * driver's) may want it while a handler here still finishes. */
    rl_http_stop(w->http);
    w->http = NULL;
    /* Shut the compute thread down: fini runs after any queued call. */
    w->ctx.stop = 1;
    if (compute_started) {
        s_task *fini = w->configured ? calloc(1, sizeof *fini) : NULL;
        if (fini) {
            fini->kind = S_TASK_FINI;
            s_submit(w, fini);
        } else if (w->configured) {
            rl_log_error("worker: out of memory: the role's fini is skipped");
        }
        pthread_mutex_lock(&w->mu);
        w->compute_quit = 1;
        pthread_mutex_unlock(&w->mu);
        s_wake_compute(w);
        pthread_join(w->compute, NULL);
    }
    s_on_done(&w->done_async); /* free finished tasks; replies are best effort */
    pthread_mutex_lock(&w->mu);
    for (s_task *t; (t = s_pop(&w->todo));) {
        rl_dataproto_free(t->in);
        free(t);
    }
    pthread_mutex_unlock(&w->mu);

    s_close_socket(w);
    uv_walk(&w->loop, s_close_walk, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    uv_loop_close(&w->loop);
    zmq_ctx_term(w->zctx);
    rl_config_free(w->ctx.config);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->smu);
    close(w->wake_fd);
    int code = w->exit_code;
    free(w);
    return code;
}
