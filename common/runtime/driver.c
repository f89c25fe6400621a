/* driver.c — single controller: slots, launcher, dispatch, futures,
 * heartbeats and supervision (see rlrt/runtime/driver.h). */
#include "rlrt/runtime/driver.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/msg.h"
#include "rlrt/runtime/value.h"
#include "rlrt/runtime/zuv.h"
#include "rlrt/wire.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <zmq.h>

typedef enum { SLOT_DOWN, SLOT_STARTING, SLOT_CONFIGURING, SLOT_READY, SLOT_FAILED } s_slot_state;

typedef struct s_subcall {
    uint64_t call_id;
    rl_future *f;
    int index;
    int sent;
    rl_dataproto *payload; /* kept until sent (queued while the rank restarts) */
    struct s_subcall *next;
} s_subcall;

typedef struct s_slot {
    rl_driver *d;
    int role; /* index into cl->roles and d->groups */
    int rank;
    const rl_placement *pl;
    const rl_cluster_node *node;
    char label[RL_CLUSTER_NAME_MAX + 16]; /* "actor/1" */
    s_slot_state state;
    unsigned char id[RL_MSG_ID_MAX];
    size_t id_len;
    int has_id;
    int worker_pid; /* from HELLO */
    uv_process_t proc;
    int proc_running;
    int proc_pid;
    uv_timer_t restart_timer;
    int restarts;
    uint64_t last_seen, last_sent;
    s_subcall *calls;
} s_slot;

struct rl_group {
    rl_driver *d;
    int role; /* index into cl->roles */
    const char *name;
    int size;
    s_slot **ranks;
};

struct rl_future {
    rl_driver *d;
    rl_group *g;
    rl_dispatch mode;
    char method[128];
    int n;
    int pending;
    rl_dataproto **results;
    int64_t *in_rows; /* dp_compute: rows sent to each rank */
    int64_t pad;
    int failed;
    int code;
    char error[1024];
    int taken;
    uint64_t t_issue;   /* uv_hrtime when issued */
    double compute_s;   /* slowest rank's handler time */
    int accounted;
};

struct rl_driver {
    rl_driver_options opt;
    const rl_cluster *cl;
    uv_loop_t loop;
    void *zctx;
    void *router;
    rl_zuv *watch;
    uv_timer_t hb_timer;
    uv_signal_t sigterm, sigint;
    uv_async_t wake;          /* API thread -> I/O thread */
    pthread_t io_thread;
    pthread_mutex_t mu;       /* guards everything below and the slots */
    pthread_cond_t cv;        /* broadcast after every loop callback */
    int start_requested, shutdown_requested, kill_requested, quit;
    char start_error[1024];
    char endpoint[512];
    int interval_ms;
    int liveness;
    s_slot *slots;
    int n_slots;
    rl_group *groups; /* one per cluster role, cluster order */
    int n_groups;
    uint64_t next_call_id;
    uint64_t seq;
    int interrupted;
    int shutting_down;
    int total_restarts;
    int child_failures;
    char fatal[1024];
    double calls_wall_s, calls_compute_s; /* completed calls (rl_driver_call_time) */
    int64_t calls_done;
};

const char *rl_dispatch_name(rl_dispatch mode)
{
    static const char *names[] = {"one_to_all", "dp_compute", "rank_zero", "all_to_all"};
    return (unsigned)mode < 4 ? names[mode] : "?";
}

/* ---- threading ----------------------------------------------------------------------
 * The libuv loop runs on its own I/O thread (s_io_main): every loop callback
 * takes d->mu, and releasing it wakes the API thread's waits. API functions
 * take d->mu, change state, and wake the loop with uv_async_send(); only the
 * I/O thread touches sockets, child processes and libuv handles. */

static void s_lock(rl_driver *d) { pthread_mutex_lock(&d->mu); }

static void s_unlock(rl_driver *d)
{
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void s_wake(rl_driver *d) { uv_async_send(&d->wake); }

/* ---- sending ---------------------------------------------------------------------- */

static int s_send_to(rl_driver *d, const unsigned char *id, size_t id_len, Rl__Envelope *env,
                     const rl_dataproto *payload)
{
    env->seq = ++d->seq;
    int rc = rl_msg_send(d->router, id, id_len, env, payload);
    rl_zuv_kick(d->watch);
    return rc;
}

static int s_send(s_slot *s, Rl__Envelope *env, const rl_dataproto *payload)
{
    if (!s->has_id)
        return rl_error_set(RL_ESTATE, "%s is not connected", s->label);
    int rc = s_send_to(s->d, s->id, s->id_len, env, payload);
    if (rc == RL_OK)
        s->last_sent = uv_now(&s->d->loop);
    return rc;
}

static void s_send_disconnect(rl_driver *d, const unsigned char *id, size_t id_len, const char *why)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Disconnect dis = RL__DISCONNECT__INIT;
    dis.reason = (char *)why;
    env.body_case = RL__ENVELOPE__BODY_DISCONNECT;
    env.disconnect = &dis;
    s_send_to(d, id, id_len, &env, NULL);
}

static void s_send_error_to(rl_driver *d, const unsigned char *id, size_t id_len, int code,
                            const char *message)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Error err = RL__ERROR__INIT;
    err.code = code;
    err.message = (char *)message;
    env.body_case = RL__ENVELOPE__BODY_ERROR;
    env.error = &err;
    s_send_to(d, id, id_len, &env, NULL);
}

/* ---- futures ------------------------------------------------------------------------- */

static void s_future_fail(rl_future *f, int index, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void s_future_fail(rl_future *f, int index, int code, const char *fmt, ...)
{
    (void)index;
    if (!f->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->error, sizeof f->error, fmt, ap);
        va_end(ap);
        f->code = code;
        f->failed = 1;
    }
    f->pending--;
}

static void s_subcall_free(s_subcall *c)
{
    rl_dataproto_free(c->payload);
    free(c);
}

static int s_send_call(s_slot *s, s_subcall *c)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Call call = RL__CALL__INIT;
    call.call_id = c->call_id;
    call.method = c->f->method;
    call.has_payload = c->payload != NULL;
    env.body_case = RL__ENVELOPE__BODY_CALL;
    env.call = &call;
    int rc = s_send(s, &env, c->payload);
    if (rc == RL_OK) {
        c->sent = 1;
        rl_dataproto_free(c->payload); /* frames hold their own references */
        c->payload = NULL;
    }
    return rc;
}

/* Detaches subcall `call_id` from slot s (NULL if unknown). */
static s_subcall *s_take_subcall(s_slot *s, uint64_t call_id)
{
    for (s_subcall **p = &s->calls; *p; p = &(*p)->next) {
        if ((*p)->call_id == call_id) {
            s_subcall *c = *p;
            *p = c->next;
            return c;
        }
    }
    return NULL;
}

static void s_fail_calls(s_slot *s, const char *why)
{
    s_subcall *c = s->calls, *keep = NULL, **tail = &keep;
    s->calls = NULL;
    while (c) {
        s_subcall *next = c->next;
        if (c->sent) {
            s_future_fail(c->f, c->index, RL_EPEER, "worker %s (pid %d on node %s) %s during call '%s'",
                          s->label, s->proc_pid ? s->proc_pid : s->worker_pid, s->node->name, why,
                          c->f->method);
            s_subcall_free(c);
        } else { /* queued: still waits for the restarted worker */
            c->next = NULL;
            *tail = c;
            tail = &c->next;
        }
        c = next;
    }
    s->calls = keep;
}

static void s_fail_all_queued(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        while (s->calls) {
            s_subcall *c = s->calls;
            s->calls = c->next;
            s_future_fail(c->f, c->index, RL_EPEER, "%s", d->fatal);
            s_subcall_free(c);
        }
    }
}

/* ---- supervision -------------------------------------------------------------------------- */

static int s_spawn(s_slot *s);

static double s_backoff_s(const rl_driver *d, int restarts)
{
    double b = d->cl->restart_backoff_s;
    for (int i = 1; i < restarts; i++)
        b *= 2;
    return b < d->cl->restart_backoff_max_s ? b : d->cl->restart_backoff_max_s;
}

/* Restarts slot s now (I/O thread, d->mu held). */
static void s_restart_now(s_slot *s)
{
    if (s->d->shutting_down || s->d->fatal[0])
        return;
    if (s_spawn(s)) {
        rl_log_error("restart of %s failed: %s", s->label, rl_error_message());
        snprintf(s->d->fatal, sizeof s->d->fatal, "role %s cannot be restored: %s",
                 s->d->groups[s->role].name, rl_error_message());
        s->state = SLOT_FAILED;
        s_fail_all_queued(s->d);
    }
}

static void s_on_restart_timer(uv_timer_t *t)
{
    s_slot *s = t->data;
    s_lock(s->d);
    s_restart_now(s);
    s_unlock(s->d);
}

static void s_schedule_restart(s_slot *s, const char *why)
{
    rl_driver *d = s->d;
    if (d->shutting_down || s->node->launch == RL_LAUNCH_EXTERNAL)
        return;
    if (s->restarts >= d->cl->restart_max) {
        snprintf(d->fatal, sizeof d->fatal,
                 "role %s cannot be restored: %s %s and was already restarted %d times "
                 "(restart.max_restarts = %d)",
                 d->groups[s->role].name, s->label, why, s->restarts, d->cl->restart_max);
        rl_log_error("%s", d->fatal);
        s->state = SLOT_FAILED;
        s_fail_all_queued(d);
        return;
    }
    s->restarts++;
    d->total_restarts++;
    double b = s_backoff_s(d, s->restarts);
    rl_log_warn("restarting %s in %.2f s (restart %d of %d)", s->label, b, s->restarts,
                d->cl->restart_max);
    uv_timer_start(&s->restart_timer, s_on_restart_timer, (uint64_t)(b * 1000), 0);
}

/* The worker in slot s is gone (silent, exited, or left). */
static void s_slot_dead(s_slot *s, const char *why)
{
    if (s->state == SLOT_DOWN || s->state == SLOT_FAILED)
        return;
    rl_log_error("worker %s (pid %d, node %s) %s", s->label,
                 s->proc_pid ? s->proc_pid : s->worker_pid, s->node->name, why);
    s->state = SLOT_DOWN;
    s->has_id = 0;
    s_fail_calls(s, why);
    if (s->proc_running) {
        uv_process_kill(&s->proc, SIGKILL); /* restart follows from the exit callback */
    } else {
        s_schedule_restart(s, why);
    }
}

static void s_on_proc_closed(uv_handle_t *h) { (void)h; }

static void s_on_exit_locked(uv_process_t *p, int64_t status, int signo)
{
    s_slot *s = p->data;
    rl_driver *d = s->d;
    s->proc_running = 0;
    uv_close((uv_handle_t *)p, s_on_proc_closed);
    char why[96];
    if (signo)
        snprintf(why, sizeof why, "was killed by signal %d", signo);
    else
        snprintf(why, sizeof why, "exited with status %lld", (long long)status);
    if (d->shutting_down) {
        if (status != 0 || signo)
            d->child_failures++;
        rl_log_info("%s (pid %d) %s", s->label, s->proc_pid, why);
        s->state = SLOT_DOWN;
        s->proc_pid = 0;
        return;
    }
    if (s->state != SLOT_DOWN && s->state != SLOT_FAILED)
        s_slot_dead(s, why); /* not running any more: this schedules the restart */
    else if (s->state != SLOT_FAILED)
        s_schedule_restart(s, why); /* we killed it after it went silent */
    s->proc_pid = 0;
}

static void s_on_exit(uv_process_t *p, int64_t status, int signo)
{
    rl_driver *d = ((s_slot *)p->data)->d;
    s_lock(d);
    s_on_exit_locked(p, status, signo);
    s_unlock(d);
}

static int s_spawn(s_slot *s)
{
    rl_driver *d = s->d;
    char rank[16], hb[16], gpus[256] = "";
    snprintf(rank, sizeof rank, "%d", s->rank);
    snprintf(hb, sizeof hb, "%d", d->interval_ms);
    for (int i = 0, n = 0; i < s->pl->ngpus; i++)
        n += snprintf(gpus + n, sizeof gpus - (size_t)n, i ? ",%d" : "%d", s->pl->gpus[i]);
    const char *level = d->opt.worker_log_level ? d->opt.worker_log_level : "info";
    char *argv[32];
    int a = 0;
    char remote[2048];
    char sshbuf[RL_CLUSTER_ADDR_MAX];
    char host[RL_CLUSTER_ADDR_MAX + RL_CLUSTER_NAME_MAX + 2];
    if (s->node->launch == RL_LAUNCH_SSH) {
        /* ssh [opts] [user@]host 'CUDA_VISIBLE_DEVICES=.. rl-worker ...' */
        snprintf(sshbuf, sizeof sshbuf, "%s", s->node->ssh_command[0] ? s->node->ssh_command : "ssh");
        for (char *tok = strtok(sshbuf, " "); tok && a < 20; tok = strtok(NULL, " "))
            argv[a++] = tok;
        if (s->node->ssh_user[0])
            snprintf(host, sizeof host, "%s@%s", s->node->ssh_user, s->node->address);
        else
            snprintf(host, sizeof host, "%s", s->node->address);
        argv[a++] = host;
        snprintf(remote, sizeof remote,
                 "%s%s%sexec %s --role %s --rank %d --driver %s --node %s --log-level %s "
                 "--heartbeat-ms %d",
                 gpus[0] ? "CUDA_VISIBLE_DEVICES=" : "", gpus, gpus[0] ? " " : "",
                 d->opt.worker_binary, d->groups[s->role].name, s->rank, d->endpoint, s->node->name,
                 level, d->interval_ms);
        argv[a++] = remote;
    } else {
        argv[a++] = (char *)d->opt.worker_binary;
        argv[a++] = "--role";
        argv[a++] = (char *)d->groups[s->role].name;
        argv[a++] = "--rank";
        argv[a++] = rank;
        argv[a++] = "--driver";
        argv[a++] = d->endpoint;
        argv[a++] = "--node";
        argv[a++] = (char *)s->node->name;
        argv[a++] = "--log-level";
        argv[a++] = (char *)level;
        argv[a++] = "--heartbeat-ms";
        argv[a++] = hb;
    }
    argv[a] = NULL;

    /* Environment: ours, plus CUDA_VISIBLE_DEVICES for local GPU placements. */
    extern char **environ;
    int nenv = 0;
    while (environ[nenv])
        nenv++;
    char **env = calloc((size_t)nenv + 2, sizeof *env);
    char cvd[300];
    int e = 0;
    for (int i = 0; i < nenv; i++)
        if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0 || !gpus[0])
            env[e++] = environ[i];
    if (gpus[0] && s->node->launch == RL_LAUNCH_LOCAL) {
        snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%s", gpus);
        env[e++] = cvd;
    }
    env[e] = NULL;

    uv_process_options_t po;
    memset(&po, 0, sizeof po);
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 1;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    po.file = argv[0];
    po.args = argv;
    po.env = env;
    po.exit_cb = s_on_exit;
    po.stdio_count = 3;
    po.stdio = stdio;
    memset(&s->proc, 0, sizeof s->proc);
    s->proc.data = s;
    int rc = uv_spawn(&d->loop, &s->proc, &po);
    free(env);
    if (rc != 0) {
        uv_close((uv_handle_t *)&s->proc, s_on_proc_closed);
        return rl_error_set(RL_EIO, "cannot start %s on node %s: %s: %s", s->label, s->node->name,
                            argv[0], uv_strerror(rc));
    }
    s->proc_running = 1;
    s->proc_pid = s->proc.pid;
    s->state = SLOT_STARTING;
    s->last_seen = uv_now(&d->loop);
    rl_log_info("started %s (pid %d, %s on %s)", s->label, s->proc_pid,
                rl_launch_mode_name(s->node->launch), s->node->name);
    return RL_OK;
}

/* ---- incoming -------------------------------------------------------------------------- */

static s_slot *s_slot_by_id(rl_driver *d, const unsigned char *id, size_t len)
{
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        if (s->has_id && s->id_len == len && memcmp(s->id, id, len) == 0)
            return s;
    }
    return NULL;
}

static void s_send_configure(s_slot *s)
{
    rl_driver *d = s->d;
    /* the whole job tree: a role reads its own `<role>.*` subtree and shared
     * sections such as `model.*` */
    char *cfg = d->opt.job ? rl_config_to_json(d->opt.job, "") : NULL;
    json_t *extra = json_pack("{s:i, s:i, s:s}", "world_size", d->groups[s->role].size, "rank",
                              s->rank, "driver_endpoint", d->endpoint);
    Rl__Value *extra_v = rl_value_from_json(extra);
    json_decref(extra);
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Configure c = RL__CONFIGURE__INIT;
    c.config.data = (uint8_t *)(cfg ? cfg : "{}");
    c.config.len = strlen((const char *)c.config.data);
    c.config_format = "json";
    c.heartbeat_ms = (uint32_t)d->interval_ms;
    c.liveness = (uint32_t)d->liveness;
    c.extra = extra_v;
    env.body_case = RL__ENVELOPE__BODY_CONFIGURE;
    env.configure = &c;
    s_send(s, &env, NULL);
    rl_value_free(extra_v);
    free(cfg);
}

static void s_on_hello(rl_driver *d, rl_msg *m)
{
    const Rl__Hello *h = m->env->hello;
    char why[512];
    int role = rl_cluster_role_index(d->cl, h->role);
    if (role < 0) {
        snprintf(why, sizeof why, "refused: %s has no role '%s'", d->cl->file, h->role);
        goto refuse;
    }
    if ((int)h->rank >= d->groups[role].size) {
        snprintf(why, sizeof why, "refused: no slot %s/%u in %s (%s has %d ranks)", h->role, h->rank,
                 d->cl->file, h->role, d->groups[role].size);
        goto refuse;
    }
    s_slot *s = d->groups[role].ranks[h->rank];
    if (s->state == SLOT_FAILED) {
        snprintf(why, sizeof why, "refused: %s was given up", s->label);
        goto refuse;
    }
    int same_id = s->has_id && s->id_len == m->id_len && memcmp(s->id, m->id, m->id_len) == 0;
    if (s->has_id && !same_id && s->state == SLOT_READY) {
        if ((int)h->pid != s->worker_pid) {
            snprintf(why, sizeof why, "refused: %s is already connected (pid %d)", s->label,
                     s->worker_pid);
            goto refuse;
        }
        /* Paranoid Pirate: the same process lost us and reconnected. Calls
         * sent on the old connection are lost (the worker drops their results). */
        rl_log_warn("%s (pid %d) reconnected", s->label, s->worker_pid);
        s_fail_calls(s, "reconnected");
    }
    memcpy(s->id, m->id, m->id_len);
    s->id_len = m->id_len;
    s->has_id = 1;
    s->worker_pid = (int)h->pid;
    s->state = SLOT_CONFIGURING;
    s->last_seen = uv_now(&d->loop);
    rl_log_debug("HELLO from %s (pid %u, node %s)", s->label, h->pid, h->node);
    s_send_configure(s);
    return;
refuse:
    rl_log_error("worker %s/%u (pid %u on %s): %s", h->role, h->rank, h->pid, h->node, why);
    s_send_error_to(d, m->id, m->id_len, RL_EINVAL, why);
    s_send_disconnect(d, m->id, m->id_len, why);
}

static void s_on_ready(s_slot *s)
{
    s->state = SLOT_READY;
    rl_log_info("%s ready (pid %d on %s)", s->label, s->worker_pid, s->node->name);
    for (s_subcall *c = s->calls; c; c = c->next) /* calls queued while restarting */
        if (!c->sent && s_send_call(s, c))
            rl_log_error("sending queued call to %s: %s", s->label, rl_error_message());
}

static void s_on_reply(s_slot *s, rl_msg *m)
{
    s_subcall *c = s_take_subcall(s, m->env->reply->call_id);
    if (!c) {
        rl_log_warn("%s: reply to unknown call %llu dropped", s->label,
                    (unsigned long long)m->env->reply->call_id);
        return;
    }
    if (m->payload_error) {
        s_future_fail(c->f, c->index, m->payload_error, "%s: bad reply payload for '%s': %s",
                      s->label, c->f->method, rl_error_message());
    } else {
        rl_future *f = c->f;
        f->results[c->index] = m->payload;
        m->payload = NULL;
        f->pending--;
        if (m->env->reply->result) {
            json_t *r = rl_value_to_json(m->env->reply->result, 0);
            double cs = json_number_value(json_object_get(r, "compute_s"));
            json_decref(r);
            if (cs > f->compute_s)
                f->compute_s = cs;
        }
        if (f->pending == 0 && !f->failed && !f->accounted) {
            f->accounted = 1;
            s->d->calls_wall_s += (double)(uv_hrtime() - f->t_issue) / 1e9;
            s->d->calls_compute_s += f->compute_s;
            s->d->calls_done++;
        }
    }
    s_subcall_free(c);
}

static void s_on_worker_error(s_slot *s, const Rl__Error *e)
{
    if (e->call_id == 0) {
        rl_log_error("%s: %s", s->label, e->message);
        if (s->state == SLOT_CONFIGURING) { /* init failed: retrying will not help */
            snprintf(s->d->fatal, sizeof s->d->fatal, "role %s cannot start: %s: %s",
                     s->d->groups[s->role].name, s->label, e->message);
            s->state = SLOT_FAILED;
            s_fail_all_queued(s->d);
        }
        return;
    }
    s_subcall *c = s_take_subcall(s, e->call_id);
    if (!c)
        return;
    s_future_fail(c->f, c->index, e->code ? e->code : RL_EPEER, "%s: method '%s' failed: %s",
                  s->label, c->f->method, e->message);
    s_subcall_free(c);
}

static void s_on_readable_locked(rl_driver *d, void *sock)
{
    rl_msg m;
    int rc = rl_msg_recv(sock, 1, &m);
    if (rc == RL_ETIMEOUT)
        return;
    s_slot *s = s_slot_by_id(d, m.id, m.id_len);
    if (s)
        s->last_seen = uv_now(&d->loop);
    if (!m.env) {
        char idbuf[64];
        rl_log_warn("garbage from peer %s: %s", rl_msg_id_str(m.id, m.id_len, idbuf, sizeof idbuf),
                    rl_error_message());
        if (!s)
            s_send_disconnect(d, m.id, m.id_len, "unknown peer; send HELLO first");
        rl_msg_clear(&m);
        return;
    }
    if (m.env->protocol_version != RL_PROTOCOL_VERSION) {
        char why[256];
        snprintf(why, sizeof why,
                 "refused: worker speaks protocol version %u, driver speaks %d",
                 m.env->protocol_version, RL_PROTOCOL_VERSION);
        rl_log_error("%s", why);
        s_send_error_to(d, m.id, m.id_len, RL_EPROTO, why);
        s_send_disconnect(d, m.id, m.id_len, why);
        rl_msg_clear(&m);
        return;
    }
    if (m.env->body_case == RL__ENVELOPE__BODY_HELLO) {
        s_on_hello(d, &m);
    } else if (!s) {
        s_send_disconnect(d, m.id, m.id_len, "unknown peer; send HELLO first");
    } else {
        switch (m.env->body_case) {
        case RL__ENVELOPE__BODY_READY: s_on_ready(s); break;
        case RL__ENVELOPE__BODY_REPLY: s_on_reply(s, &m); break;
        case RL__ENVELOPE__BODY_ERROR: s_on_worker_error(s, m.env->error); break;
        case RL__ENVELOPE__BODY_HEARTBEAT: break;
        case RL__ENVELOPE__BODY_DISCONNECT:
            if (!d->shutting_down) {
                char why[300];
                snprintf(why, sizeof why, "left (%s)", m.env->disconnect->reason);
                s_slot_dead(s, why);
            }
            break;
        default:
            rl_log_warn("%s: unexpected %s", s->label, rl_msg_kind_name(m.env->body_case));
        }
    }
    rl_msg_clear(&m);
}

static void s_on_readable(void *sock, void *arg)
{
    rl_driver *d = arg;
    s_lock(d);
    s_on_readable_locked(d, sock);
    s_unlock(d);
}

/* ---- timers and signals ---------------------------------------------------------------------- */

static void s_on_heartbeat_locked(rl_driver *d)
{
    uint64_t now = uv_now(&d->loop);
    uint64_t limit = (uint64_t)d->interval_ms * (uint64_t)d->liveness;
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        if (s->state != SLOT_READY && s->state != SLOT_CONFIGURING && s->state != SLOT_STARTING)
            continue;
        /* A starting process gets a generous window to say HELLO. */
        uint64_t window = s->state == SLOT_STARTING ? 10 * limit + 10000 : limit;
        if (now - s->last_seen > window) {
            char why[96];
            snprintf(why, sizeof why, "missed heartbeats for %.1f s",
                     (double)(now - s->last_seen) / 1000.0);
            if (s->state == SLOT_STARTING && !s->proc_running)
                continue; /* external: just not there yet */
            s_slot_dead(s, why);
            continue;
        }
        if (s->has_id && now - s->last_sent >= (uint64_t)d->interval_ms) {
            Rl__Envelope env = RL__ENVELOPE__INIT;
            Rl__Heartbeat hb = RL__HEARTBEAT__INIT;
            hb.time_ns = uv_hrtime();
            env.body_case = RL__ENVELOPE__BODY_HEARTBEAT;
            env.heartbeat = &hb;
            s_send(s, &env, NULL);
        }
    }
}

static void s_on_heartbeat(uv_timer_t *t)
{
    rl_driver *d = t->data;
    s_lock(d);
    s_on_heartbeat_locked(d);
    s_unlock(d);
}

static void s_on_signal(uv_signal_t *h, int signum)
{
    rl_driver *d = h->data;
    s_lock(d);
    if (!d->interrupted)
        rl_log_warn("%s: stopping the job", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    d->interrupted = signum;
    s_unlock(d);
}

static void s_launch_all(rl_driver *d);
static void s_send_queued(rl_driver *d);
static void s_send_shutdown(rl_driver *d);

/* I/O thread: work requested by the API thread. */
static void s_on_wake(uv_async_t *a)
{
    rl_driver *d = a->data;
    s_lock(d);
    if (d->start_requested == 1) {
        s_launch_all(d);
        d->start_requested = 2;
    }
    if (d->shutdown_requested == 1) {
        s_send_shutdown(d);
        d->shutdown_requested = 2;
    }
    if (d->kill_requested) {
        for (int i = 0; i < d->n_slots; i++)
            if (d->slots[i].proc_running)
                uv_process_kill(&d->slots[i].proc, SIGKILL);
        d->kill_requested = 0;
    }
    s_send_queued(d);
    if (d->quit)
        uv_stop(&d->loop);
    s_unlock(d);
}

static void *s_io_main(void *arg)
{
    rl_driver *d = arg;
    uv_run(&d->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- construction ------------------------------------------------------------------------------ */

rl_driver *rl_driver_new(const rl_driver_options *opt)
{
    rl_driver *d = calloc(1, sizeof *d);
    if (!d) {
        rl_error_set(RL_ENOMEM, "driver: out of memory");
        return NULL;
    }
    d->opt = *opt;
    d->cl = opt->cluster;
    if (d->opt.ready_timeout_ms <= 0)
        d->opt.ready_timeout_ms = 30000;
    d->interval_ms = (int)(d->cl->heartbeat_interval_s * 1000);
    if (d->interval_ms < 10)
        d->interval_ms = 10;
    d->liveness = d->cl->heartbeat_liveness > 0 ? d->cl->heartbeat_liveness : 3;
    uv_loop_init(&d->loop);
    d->zctx = zmq_ctx_new();
    d->router = zmq_socket(d->zctx, ZMQ_ROUTER);
    int linger = 0, mandatory = 0;
    zmq_setsockopt(d->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d->router, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    const char *bind = opt->bind_override ? opt->bind_override : d->cl->driver_bind_endpoint;
    if (zmq_bind(d->router, bind) != 0) {
        rl_error_set(RL_EIO, "driver cannot bind %s: %s", bind, zmq_strerror(zmq_errno()));
        zmq_close(d->router);
        zmq_ctx_term(d->zctx);
        uv_loop_close(&d->loop);
        free(d);
        return NULL;
    }
    if (opt->bind_override) {
        size_t len = sizeof d->endpoint;
        zmq_getsockopt(d->router, ZMQ_LAST_ENDPOINT, d->endpoint, &len);
    } else {
        snprintf(d->endpoint, sizeof d->endpoint, "%s", d->cl->driver_endpoint);
    }
    d->watch = rl_zuv_start(&d->loop, d->router, s_on_readable, d);

    d->n_slots = d->cl->n_placements;
    d->slots = calloc((size_t)(d->n_slots ? d->n_slots : 1), sizeof *d->slots);
    d->n_groups = d->cl->n_roles;
    d->groups = calloc((size_t)(d->n_groups ? d->n_groups : 1), sizeof *d->groups);
    for (int r = 0; r < d->n_groups; r++) {
        d->groups[r].d = d;
        d->groups[r].role = r;
        d->groups[r].name = d->cl->roles[r].name;
        d->groups[r].size = d->cl->roles[r].count;
        d->groups[r].ranks = calloc((size_t)(d->groups[r].size ? d->groups[r].size : 1),
                                    sizeof(s_slot *));
    }
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        const rl_placement *pl = &d->cl->placements[i];
        s->d = d;
        s->role = pl->role;
        s->rank = pl->rank;
        s->pl = pl;
        s->node = &d->cl->nodes[pl->node];
        snprintf(s->label, sizeof s->label, "%s/%d", d->cl->roles[pl->role].name, pl->rank);
        uv_timer_init(&d->loop, &s->restart_timer);
        s->restart_timer.data = s;
        d->groups[pl->role].ranks[pl->rank] = s;
    }
    uv_timer_init(&d->loop, &d->hb_timer);
    d->hb_timer.data = d;
    uv_async_init(&d->loop, &d->wake, s_on_wake);
    d->wake.data = d;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    uv_timer_start(&d->hb_timer, s_on_heartbeat, (uint64_t)d->interval_ms, (uint64_t)d->interval_ms);
    uv_signal_init(&d->loop, &d->sigterm);
    uv_signal_init(&d->loop, &d->sigint);
    d->sigterm.data = d->sigint.data = d;
    uv_signal_start(&d->sigterm, s_on_signal, SIGTERM);
    uv_signal_start(&d->sigint, s_on_signal, SIGINT);
    pthread_create(&d->io_thread, NULL, s_io_main, d);
    return d;
}

const char *rl_driver_endpoint(const rl_driver *d) { return d->endpoint; }
int rl_driver_interrupted(const rl_driver *d)
{
    s_lock((rl_driver *)d);
    int v = d->interrupted;
    s_unlock((rl_driver *)d);
    return v;
}
const char *rl_driver_fatal(const rl_driver *d) { return d->fatal[0] ? d->fatal : NULL; }
void rl_driver_call_time(const rl_driver *d, double *wall_s, double *compute_s, int64_t *calls)
{
    s_lock((rl_driver *)d);
    if (wall_s)
        *wall_s = d->calls_wall_s;
    if (compute_s)
        *compute_s = d->calls_compute_s;
    if (calls)
        *calls = d->calls_done;
    s_unlock((rl_driver *)d);
}

int rl_driver_restarts(const rl_driver *d)
{
    s_lock((rl_driver *)d);
    int v = d->total_restarts;
    s_unlock((rl_driver *)d);
    return v;
}

/* Waits (holding d->mu, released while blocked) until cond(arg) holds, the
 * timeout passes, the job is interrupted or fatal. Returns 0, RL_ETIMEOUT or
 * RL_ESTATE (message set). The I/O thread does the work meanwhile. */
static int s_wait_until(rl_driver *d, int (*cond)(void *), void *arg, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    while (!cond(arg)) {
        if (d->interrupted)
            return rl_error_set(RL_ESTATE, "interrupted by %s",
                                d->interrupted == SIGTERM ? "SIGTERM" : "SIGINT");
        if (d->fatal[0])
            return rl_error_set(RL_ESTATE, "%s", d->fatal);
        if (timeout_ms < 0) {
            pthread_cond_wait(&d->cv, &d->mu);
        } else if (pthread_cond_timedwait(&d->cv, &d->mu, &deadline) == ETIMEDOUT) {
            if (!cond(arg))
                return RL_ETIMEOUT;
        }
    }
    return RL_OK;
}

static int s_false(void *arg)
{
    (void)arg;
    return 0;
}

int rl_driver_poll(rl_driver *d, int timeout_ms)
{
    if (timeout_ms <= 0)
        return RL_OK; /* the I/O thread runs on its own */
    s_lock(d);
    int rc = s_wait_until(d, s_false, NULL, timeout_ms);
    s_unlock(d);
    return rc == RL_ETIMEOUT ? RL_OK : rc;
}

typedef struct {
    rl_driver *d;
    rl_group *g; /* NULL: every slot */
} s_ready_arg;

static int s_all_ready(void *arg)
{
    s_ready_arg *a = arg;
    rl_driver *d = a->d;
    for (int i = 0; i < d->n_slots; i++)
        if ((!a->g || d->slots[i].role == a->g->role) && d->slots[i].state != SLOT_READY)
            return 0;
    return 1;
}

/* Caller holds d->mu. */
static int s_wait_ready(rl_driver *d, rl_group *g, int timeout_ms)
{
    s_ready_arg a = {d, g};
    int rc = s_wait_until(d, s_all_ready, &a, timeout_ms);
    if (rc != RL_ETIMEOUT)
        return rc;
    char list[1024];
    int n = 0, missing = 0;
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        if ((g && s->role != g->role) || s->state == SLOT_READY)
            continue;
        missing++;
        if (n < (int)sizeof list - 100)
            n += snprintf(list + n, sizeof list - (size_t)n, "%s%s (node %s, %s)", n ? ", " : "",
                          s->label, s->node->name, rl_launch_mode_name(s->node->launch));
    }
    return rl_error_set(RL_ETIMEOUT, "timed out after %.1f s waiting for %d worker%s: %s",
                        timeout_ms / 1000.0, missing, missing == 1 ? "" : "s", list);
}

/* I/O thread: launches every local/ssh slot (on rl_driver_start). */
static void s_launch_all(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        if (s->node->launch == RL_LAUNCH_EXTERNAL)
            continue;
        if (s_spawn(s)) {
            snprintf(d->start_error, sizeof d->start_error, "%s", rl_error_message());
            return;
        }
    }
}

static int s_started(void *arg)
{
    rl_driver *d = arg;
    return d->start_requested == 2 || d->start_error[0];
}

int rl_driver_start(rl_driver *d)
{
    int external = 0;
    for (int i = 0; i < d->n_slots; i++)
        external |= d->slots[i].node->launch == RL_LAUNCH_EXTERNAL;
    int timeout = d->opt.ready_timeout_ms;
    if (external) {
        timeout = (int)(d->cl->external_wait_timeout_s * 1000);
        rl_log_info("waiting up to %.1f s for external workers to connect to %s", timeout / 1000.0,
                    d->endpoint);
    }
    s_lock(d);
    d->start_requested = 1;
    s_wake(d);
    int rc = s_wait_until(d, s_started, d, -1);
    if (!rc && d->start_error[0])
        rc = rl_error_set(RL_EIO, "%s", d->start_error);
    if (!rc)
        rc = s_wait_ready(d, NULL, timeout);
    s_unlock(d);
    return rc;
}

rl_group *rl_driver_group(rl_driver *d, const char *role)
{
    int r = rl_cluster_role_index(d->cl, role);
    if (r < 0) {
        rl_error_set(RL_ENOTFOUND, "role %s is not in %s", role, d->cl->file);
        return NULL;
    }
    if (d->groups[r].size == 0) {
        rl_error_set(RL_ENOTFOUND, "role %s has no ranks in %s", role, d->cl->file);
        return NULL;
    }
    return &d->groups[r];
}

int rl_group_size(const rl_group *g) { return g->size; }
const char *rl_group_role(const rl_group *g) { return g->name; }
int rl_group_pid(const rl_group *g, int rank)
{
    if (rank < 0 || rank >= g->size)
        return 0;
    s_lock(g->d);
    int pid = g->ranks[rank]->proc_pid;
    s_unlock(g->d);
    return pid;
}

const char *rl_group_address(const rl_group *g, int rank)
{
    return (rank >= 0 && rank < g->size) ? g->ranks[rank]->node->address : NULL;
}

int rl_group_wait_ready(rl_group *g, int timeout_ms)
{
    s_lock(g->d);
    int rc = s_wait_ready(g->d, g, timeout_ms);
    s_unlock(g->d);
    return rc;
}

/* ---- calls ------------------------------------------------------------------------------ */

static rl_future *s_future_new(rl_group *g, const char *method, rl_dispatch mode, int n)
{
    rl_future *f = calloc(1, sizeof *f);
    f->d = g->d;
    f->g = g;
    f->mode = mode;
    snprintf(f->method, sizeof f->method, "%s", method);
    f->n = n;
    f->results = calloc((size_t)n, sizeof *f->results);
    f->in_rows = calloc((size_t)n, sizeof *f->in_rows);
    f->t_issue = uv_hrtime();
    return f;
}

/* Queues (and sends if the rank is READY) one sub-call; takes `payload`. */
static void s_issue(rl_future *f, int index, s_slot *s, rl_dataproto *payload)
{
    rl_driver *d = f->d;
    f->pending++;
    if (s->state == SLOT_FAILED || d->fatal[0]) {
        s_future_fail(f, index, RL_EPEER, "%s", d->fatal[0] ? d->fatal : "worker given up");
        rl_dataproto_free(payload);
        return;
    }
    s_subcall *c = calloc(1, sizeof *c);
    c->call_id = ++d->next_call_id;
    c->f = f;
    c->index = index;
    c->payload = payload;
    c->next = s->calls;
    s->calls = c; /* sent by the I/O thread (s_send_queued) once READY */
}

/* I/O thread: sends the queued calls of every READY slot. */
static void s_send_queued(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        if (s->state != SLOT_READY)
            continue;
        for (s_subcall **p = &s->calls; *p;) {
            s_subcall *c = *p;
            if (c->sent || !s_send_call(s, c)) {
                p = &c->next;
                continue;
            }
            *p = c->next;
            s_future_fail(c->f, c->index, rl_error_code(), "sending '%s' to %s: %s", c->f->method,
                          s->label, rl_error_message());
            s_subcall_free(c);
        }
    }
}

static rl_dataproto *s_view(const rl_dataproto *in)
{
    if (!in) {
        rl_dataproto *e = rl_dataproto_new();
        rl_dataproto_set_rows(e, 0);
        return e;
    }
    return rl_dataproto_select(in, NULL, 0, NULL, 0);
}

rl_future *rl_group_call(rl_group *g, const char *method, rl_dispatch mode, const rl_dataproto *in)
{
    if (mode == RL_DISPATCH_ALL_TO_ALL) {
        rl_error_set(RL_EINVAL, "all_to_all needs one DataProto per rank: use rl_group_call_each");
        return NULL;
    }
    rl_future *f = s_future_new(g, method, mode, mode == RL_DISPATCH_RANK_ZERO ? 1 : g->size);
    int n = f->n;
    rl_dataproto **parts = calloc((size_t)n, sizeof *parts);
    if (mode == RL_DISPATCH_DP_COMPUTE) {
        rl_dataproto *src = s_view(in);
        int rc = rl_dataproto_chunk(src, n, 1, parts, &f->pad);
        rl_dataproto_free(src);
        if (rc) {
            free(parts);
            rl_future_free(f);
            rl_error_wrap(rc, "dp_compute '%s' on %s", method, g->name);
            return NULL;
        }
    } else {
        for (int r = 0; r < n; r++)
            parts[r] = s_view(in);
    }
    s_lock(g->d);
    for (int r = 0; r < n; r++) {
        f->in_rows[r] = rl_dataproto_rows(parts[r]);
        s_issue(f, r, g->ranks[r], parts[r]);
    }
    s_unlock(g->d);
    s_wake(g->d);
    free(parts);
    return f;
}

rl_future *rl_group_call_each(rl_group *g, const char *method, rl_dataproto *const *per_rank)
{
    rl_future *f = s_future_new(g, method, RL_DISPATCH_ALL_TO_ALL, g->size);
    rl_dataproto **parts = calloc((size_t)g->size, sizeof *parts);
    for (int r = 0; r < g->size; r++)
        parts[r] = s_view(per_rank ? per_rank[r] : NULL);
    s_lock(g->d);
    for (int r = 0; r < g->size; r++)
        s_issue(f, r, g->ranks[r], parts[r]);
    s_unlock(g->d);
    s_wake(g->d);
    free(parts);
    return f;
}

/* A future completes when every rank answered or as soon as one failed. */
static int s_future_complete(void *arg)
{
    const rl_future *f = arg;
    return f->pending == 0 || f->failed;
}

int rl_future_done(const rl_future *f)
{
    s_lock(f->d);
    int done = s_future_complete((void *)f);
    s_unlock(f->d);
    return done;
}

int rl_future_wait(rl_future *f, int timeout_ms)
{
    rl_driver *d = f->d;
    s_lock(d);
    int rc = s_wait_until(d, s_future_complete, f, timeout_ms);
    if (rc == RL_ETIMEOUT)
        rc = rl_error_set(RL_ETIMEOUT, "call '%s' on %s: no answer after %.1f s", f->method,
                          f->g->name, timeout_ms / 1000.0);
    else if (!rc && f->failed)
        rc = rl_error_set(f->code, "%s", f->error);
    s_unlock(d);
    return rc;
}

static int s_take_rank(rl_future *f, int rank, rl_dataproto **out)
{
    if (f->pending || f->failed)
        return rl_error_set(RL_ESTATE, "call '%s' is %s", f->method,
                            f->pending ? "not finished" : "failed");
    if (rank < 0 || rank >= f->n)
        return rl_error_set(RL_ERANGE, "rank %d outside [0, %d)", rank, f->n);
    *out = f->results[rank];
    f->results[rank] = NULL;
    return RL_OK;
}

int rl_future_take_rank(rl_future *f, int rank, rl_dataproto **out)
{
    s_lock(f->d);
    int rc = s_take_rank(f, rank, out);
    s_unlock(f->d);
    return rc;
}

/* Results are complete and no longer touched by the I/O thread once the
 * future is done, so the concatenation runs without the lock. */
int rl_future_take(rl_future *f, rl_dataproto **out)
{
    if (!rl_future_done(f))
        return rl_error_set(RL_ESTATE, "call '%s' is not finished", f->method);
    if (f->mode == RL_DISPATCH_RANK_ZERO)
        return rl_future_take_rank(f, 0, out);
    if (f->mode != RL_DISPATCH_DP_COMPUTE)
        return rl_error_set(RL_EINVAL, "%s call '%s' has one result per rank: use rl_future_take_rank",
                            rl_dispatch_name(f->mode), f->method);
    if (f->pending || f->failed)
        return rl_error_set(RL_ESTATE, "call '%s' is %s", f->method,
                            f->pending ? "not finished" : "failed");
    int n = 0;
    int64_t rows = 0;
    for (int r = 0; r < f->n; r++) {
        if (!f->results[r])
            continue;
        if (f->pad && rl_dataproto_rows(f->results[r]) != f->in_rows[r])
            return rl_error_set(RL_ESHAPE,
                                "dp_compute '%s': %s/%d returned %lld rows for %lld input rows; "
                                "cannot strip %lld padding rows",
                                f->method, f->g->name, r,
                                (long long)rl_dataproto_rows(f->results[r]),
                                (long long)f->in_rows[r], (long long)f->pad);
        n++;
        rows += rl_dataproto_rows(f->results[r]);
    }
    if (n == 0) {
        *out = NULL;
        return RL_OK;
    }
    if (n != f->n)
        return rl_error_set(RL_ESHAPE, "dp_compute '%s': %d of %d ranks returned no payload",
                            f->method, f->n - n, f->n);
    rl_dataproto *cat = rl_dataproto_concat(f->results, f->n);
    if (!cat)
        return rl_error_wrap(rl_error_code(), "dp_compute '%s': concat of replies", f->method);
    if (f->pad) {
        rl_dataproto *stripped = rl_dataproto_slice(cat, 0, rows - f->pad);
        rl_dataproto_free(cat);
        cat = stripped;
    }
    *out = cat;
    return RL_OK;
}

void rl_future_free(rl_future *f)
{
    if (!f)
        return;
    /* Detach sub-calls still in flight so late replies are dropped. */
    s_lock(f->d);
    for (int i = 0; i < f->d->n_slots; i++) {
        s_slot *s = &f->d->slots[i];
        for (s_subcall **p = &s->calls; *p;) {
            if ((*p)->f == f) {
                s_subcall *c = *p;
                *p = c->next;
                s_subcall_free(c);
            } else {
                p = &(*p)->next;
            }
        }
    }
    s_unlock(f->d);
    for (int r = 0; r < f->n; r++)
        rl_dataproto_free(f->results[r]);
    free(f->results);
    free(f->in_rows);
    free(f);
}

int rl_group_call_sync(rl_group *g, const char *method, rl_dispatch mode, const rl_dataproto *in,
                       rl_dataproto **out)
{
    rl_future *f = rl_group_call(g, method, mode, in);
    if (!f)
        return rl_error_code();
    int rc = rl_future_wait(f, -1);
    if (!rc)
        rc = out ? rl_future_take(f, out) : RL_OK;
    rl_future_free(f);
    return rc;
}

/* ---- shutdown --------------------------------------------------------------------------- */

/* SHUTDOWN went out and every local child exited. */
static int s_children_gone(void *arg)
{
    rl_driver *d = arg;
    if (d->shutdown_requested == 1)
        return 0;
    for (int i = 0; i < d->n_slots; i++)
        if (d->slots[i].proc_running)
            return 0;
    return 1;
}

/* I/O thread: SHUTDOWN to every connected worker. */
static void s_send_shutdown(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        uv_timer_stop(&s->restart_timer);
        if (!s->has_id)
            continue;
        Rl__Envelope env = RL__ENVELOPE__INIT;
        Rl__Shutdown sd = RL__SHUTDOWN__INIT;
        sd.reason = d->interrupted ? "driver interrupted" : "job finished";
        env.body_case = RL__ENVELOPE__BODY_SHUTDOWN;
        env.shutdown = &sd;
        s_send(s, &env, NULL);
    }
}

int rl_driver_shutdown(rl_driver *d, int timeout_ms)
{
    s_lock(d);
    d->shutting_down = 1;
    d->shutdown_requested = 1;
    s_wake(d);
    /* neither a second signal nor a fatal error may cut the wait short */
    int saved = d->interrupted;
    char fatal[sizeof d->fatal];
    memcpy(fatal, d->fatal, sizeof fatal);
    d->interrupted = 0;
    d->fatal[0] = '\0';
    int rc = s_wait_until(d, s_children_gone, d, timeout_ms);
    if (rc == RL_ETIMEOUT) {
        for (int i = 0; i < d->n_slots; i++)
            if (d->slots[i].proc_running)
                rl_log_warn("%s did not exit in %.1f s: SIGKILL", d->slots[i].label,
                            timeout_ms / 1000.0);
        d->kill_requested = 1;
        s_wake(d);
        d->interrupted = 0;
        s_wait_until(d, s_children_gone, d, 2000);
        d->child_failures++;
    }
    memcpy(d->fatal, fatal, sizeof fatal);
    d->interrupted = saved;
    for (int i = 0; i < d->n_slots; i++)
        d->slots[i].has_id = 0;
    rc = d->child_failures ? rl_error_set(RL_EPEER, "%d worker(s) did not exit cleanly",
                                          d->child_failures)
                           : RL_OK;
    s_unlock(d);
    return rc;
}

static void s_close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void rl_driver_free(rl_driver *d)
{
    if (!d)
        return;
    s_lock(d);
    d->quit = 1;
    s_unlock(d);
    s_wake(d);
    pthread_join(d->io_thread, NULL);
    /* the I/O thread is gone: this thread may use the loop now */
    for (int i = 0; i < d->n_slots; i++) {
        s_slot *s = &d->slots[i];
        if (s->proc_running)
            uv_process_kill(&s->proc, SIGKILL);
        while (s->calls) {
            s_subcall *c = s->calls;
            s->calls = c->next;
            s_subcall_free(c);
        }
    }
    rl_zuv_stop(d->watch);
    /* let queued SHUTDOWNs reach external workers before the socket goes */
    int linger = 500;
    zmq_setsockopt(d->router, ZMQ_LINGER, &linger, sizeof linger);
    uv_walk(&d->loop, s_close_walk, NULL);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    uv_loop_close(&d->loop);
    zmq_close(d->router);
    zmq_ctx_term(d->zctx);
    for (int r = 0; r < d->n_groups; r++)
        free(d->groups[r].ranks);
    free(d->groups);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d->slots);
    free(d);
}
