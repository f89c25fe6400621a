/* relay.c — a node relay between the driver and a node's workers (see
 * rlrt/runtime/relay.h). One thread, zmq_poll over two sockets: a ROUTER
 * bound for the workers (front) and a DEALER connected to the driver
 * (back). Messages are moved frame by frame (zero-copy); only the envelope
 * frame is decoded, to learn calls and replies. */
#include "rlrt/runtime/relay.h"

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/wire.h"
#include "common/runtime/msg.h"
#include "common/runtime/net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define S_MAX_CALLS 4096  /* unanswered calls tracked; more go untracked */
#define S_MAX_METHODS 64  /* methods tracked; more go untracked */
#define S_DRAIN_MAX 1024  /* messages per socket per poll round */
#define S_HWM 100000      /* messages queued per peer before a send fails */

typedef struct {
    zmq_msg_t *f;
    int n;
} s_message;

typedef struct {
    unsigned char wid[RL_MSG_PEER_ID_MAX];
    size_t wid_len;
    uint64_t call_id;
    int method;
} s_call;

typedef struct {
    char name[128];
    int outstanding; /* tracked calls not answered yet */
    s_message *held;
    int n_held, cap_held;
    int64_t first_held_ms;
} s_method;

typedef struct {
    const rl_relay_options *opt;
    void *ctx, *front, *back;
    s_call calls[S_MAX_CALLS];
    int n_calls;
    s_method methods[S_MAX_METHODS];
    int n_methods;
    rl_relay_stats st;
    char dir[256]; /* with security: the socket's private directory */
} s_relay;

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rl_relay_endpoint(const char *job_id, const char *node, int secure, char *out,
                       size_t out_size)
{
    if (secure)
        snprintf(out, out_size, "ipc:///tmp/rlrt-%.32s-%.63s/relay", job_id, node);
    else
        snprintf(out, out_size, "ipc://@rlrt-%.32s-%.63s", job_id, node);
}

/* With security: the workers' socket is a path whose directory is ours and
 * closed to everyone else (made here, 0700), so only this user reaches it. */
static int s_private_dir(const char *bind, char *dir, size_t dir_size)
{
    const char *path = bind + 6; /* after ipc:// */
    const char *slash = strrchr(path, '/');
    if (strncmp(bind, "ipc://", 6) != 0 || path[0] != '/' || !slash || slash == path)
        return rl_error_set(RL_EINVAL, "relay: with security the workers' side must be a Unix "
                            "socket at a path, ipc:///DIR/NAME (got '%s'): the file system, not "
                            "CURVE, guards it", bind);
    if ((size_t)(slash - path) >= dir_size)
        return rl_error_set(RL_EINVAL, "relay: the path of '%s' is too long", bind);
    snprintf(dir, dir_size, "%.*s", (int)(slash - path), path);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return rl_error_set(RL_EIO, "relay: cannot make %s: %s", dir, strerror(errno));
    struct stat st;
    if (lstat(dir, &st) != 0)
        return rl_error_set(RL_EIO, "relay: %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return rl_error_set(RL_EINVAL, "relay: %s must be a directory of this user that nobody "
                            "else may enter (mode 0700); it is %s, owner %ld, mode %03o", dir,
                            S_ISDIR(st.st_mode) ? "a directory" : "not a directory",
                            (long)st.st_uid, (unsigned)(st.st_mode & 0777));
    return RL_OK;
}

static void s_message_close(s_message *m)
{
    for (int i = 0; i < m->n; i++)
        zmq_msg_close(&m->f[i]);
    free(m->f);
    m->f = NULL;
    m->n = 0;
}

/* Receives every frame of one message (RL_ETIMEOUT: none queued). */
static int s_recv(void *sock, s_message *m)
{
    m->f = NULL;
    m->n = 0;
    int cap = 0;
    do {
        if (m->n == RL_MSG_MAX_FRAMES + 2) { /* more than any valid message */
            rl_net_drain(sock);
            s_message_close(m);
            return rl_error_set(RL_EPROTO, "a message of more than %d frames", m->n);
        }
        if (m->n == cap) {
            cap = cap ? cap * 2 : 4;
            zmq_msg_t *f = realloc(m->f, sizeof *f * (size_t)cap);
            if (!f) {
                rl_net_drain(sock);
                s_message_close(m);
                return rl_error_set(RL_ENOMEM, "relay: out of memory");
            }
            m->f = f;
        }
        zmq_msg_init(&m->f[m->n]);
        if (zmq_msg_recv(&m->f[m->n], sock, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno();
            zmq_msg_close(&m->f[m->n]);
            s_message_close(m);
            return e == EAGAIN ? RL_ETIMEOUT : rl_error_set(RL_EIO, "receive: %s", zmq_strerror(e));
        }
        m->n++;
    } while (rl_net_more(sock));
    return RL_OK;
}

/* Sends the frames from `first` on (moving them; m is closed after). */
static int s_send(void *sock, s_message *m, int first)
{
    int rc = RL_OK;
    for (int i = first; i < m->n && rc == RL_OK; i++)
        if (zmq_msg_send(&m->f[i], sock, (i + 1 < m->n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
            rc = rl_error_set(RL_EIO, "send: %s", zmq_strerror(zmq_errno()));
    s_message_close(m);
    return rc;
}

/* The envelope of frame i, or NULL (the caller frees it). */
static Rl__Envelope *s_envelope(const s_message *m, int i)
{
    Rl__Envelope *env = NULL;
    if (i < m->n)
        rl_wire_unpack_envelope(zmq_msg_data(&m->f[i]), zmq_msg_size(&m->f[i]), &env);
    return env;
}

static int s_method_index(s_relay *r, const char *name)
{
    for (int i = 0; i < r->n_methods; i++)
        if (strcmp(r->methods[i].name, name) == 0)
            return i;
    if (r->n_methods == S_MAX_METHODS || strlen(name) >= sizeof r->methods[0].name)
        return -1;
    s_method *mt = &r->methods[r->n_methods];
    memset(mt, 0, sizeof *mt);
    snprintf(mt->name, sizeof mt->name, "%s", name);
    return r->n_methods++;
}

static void s_flush(s_relay *r, s_method *mt)
{
    if (!mt->n_held)
        return;
    for (int i = 0; i < mt->n_held; i++)
        if (s_send(r->back, &mt->held[i], 0)) {
            r->st.dropped++;
            rl_log_warn("relay %s: a reply to the driver was lost: %s", r->opt->node,
                        rl_error_message());
        }
    mt->n_held = 0;
    r->st.sends_up++;
}

static void s_flush_all(s_relay *r)
{
    for (int i = 0; i < r->n_methods; i++)
        s_flush(r, &r->methods[i]);
}

/* The role/rank part of a worker identity "ROLE/RANK#PID.GEN" (its length
 * up to and with '#'), or 0. */
static size_t s_slot_prefix(const unsigned char *wid, size_t len)
{
    const unsigned char *hash = memchr(wid, '#', len);
    return hash ? (size_t)(hash - wid) + 1 : 0;
}

static void s_forget_slot(s_relay *r, const unsigned char *wid, size_t len)
{
    size_t p = s_slot_prefix(wid, len);
    if (!p)
        return;
    for (int i = 0; i < r->n_calls;) {
        s_call *c = &r->calls[i];
        if (c->wid_len >= p && memcmp(c->wid, wid, p) == 0) {
            s_method *mt = &r->methods[c->method];
            if (--mt->outstanding == 0)
                s_flush(r, mt);
            r->calls[i] = r->calls[--r->n_calls];
        } else {
            i++;
        }
    }
}

static int s_valid_wid(const zmq_msg_t *f)
{
    size_t n = zmq_msg_size((zmq_msg_t *)f);
    const unsigned char *p = zmq_msg_data((zmq_msg_t *)f);
    return n > 0 && n <= RL_MSG_PEER_ID_MAX && p[0] != RL_MSG_RELAY_MARK;
}

/* driver -> worker: [wid, envelope, payload...] */
static void s_down(s_relay *r, s_message *m)
{
    if (m->n < 2 || !s_valid_wid(&m->f[0])) {
        r->st.dropped++;
        s_message_close(m);
        return;
    }
    r->st.down++;
    s_call call = {0};
    int track = 0;
    if (r->opt->hold_ms > 0 && r->n_calls < S_MAX_CALLS) {
        Rl__Envelope *env = s_envelope(m, 1);
        if (env && env->body_case == RL__ENVELOPE__BODY_CALL && env->call->call_id &&
            env->call->method) {
            call.method = s_method_index(r, env->call->method);
            call.call_id = env->call->call_id;
            call.wid_len = zmq_msg_size(&m->f[0]);
            memcpy(call.wid, zmq_msg_data(&m->f[0]), call.wid_len);
            track = call.method >= 0;
        }
        if (env)
            rl__envelope__free_unpacked(env, NULL);
    }
    if (s_send(r->front, m, 0)) { /* no such worker here (ROUTER_MANDATORY) */
        r->st.dropped++;
        rl_log_debug("relay %s: a message for a worker not connected here: %s", r->opt->node,
                     rl_error_message());
        return;
    }
    if (track) {
        r->calls[r->n_calls++] = call;
        r->methods[call.method].outstanding++;
    }
}

/* worker -> driver: [wid, envelope, payload...] */
static void s_up(s_relay *r, s_message *m, int64_t now)
{
    if (m->n < 2 || !s_valid_wid(&m->f[0])) {
        r->st.dropped++;
        s_message_close(m);
        return;
    }
    r->st.up++;
    const unsigned char *wid = zmq_msg_data(&m->f[0]);
    size_t wid_len = zmq_msg_size(&m->f[0]);
    Rl__Envelope *env = s_envelope(m, 1);
    uint64_t answers = 0;
    if (env && env->body_case == RL__ENVELOPE__BODY_REPLY)
        answers = env->reply->call_id;
    else if (env && env->body_case == RL__ENVELOPE__BODY_ERROR)
        answers = env->error->call_id;
    int hello = env && env->body_case == RL__ENVELOPE__BODY_HELLO;
    if (env)
        rl__envelope__free_unpacked(env, NULL);
    for (int i = 0; answers && i < r->n_calls; i++) {
        s_call *c = &r->calls[i];
        if (c->call_id != answers || c->wid_len != wid_len || memcmp(c->wid, wid, wid_len) != 0)
            continue;
        s_method *mt = &r->methods[c->method];
        r->calls[i] = r->calls[--r->n_calls];
        mt->outstanding--;
        if (mt->outstanding > 0) { /* hold it for the others */
            if (mt->n_held == mt->cap_held) {
                int cap = mt->cap_held ? mt->cap_held * 2 : 8;
                s_message *h = realloc(mt->held, sizeof *h * (size_t)cap);
                if (!h)
                    break; /* send it now */
                mt->held = h;
                mt->cap_held = cap;
            }
            if (!mt->n_held)
                mt->first_held_ms = now;
            mt->held[mt->n_held++] = *m;
            m->f = NULL;
            m->n = 0;
            r->st.held++;
            return;
        }
        s_flush(r, mt); /* the last answer: the others go with it */
        break;
    }
    if (!answers)
        s_flush_all(r); /* a worker's messages keep their order */
    if (hello)
        s_forget_slot(r, wid, wid_len);
    if (s_send(r->back, m, 0)) {
        r->st.dropped++;
        rl_log_warn("relay %s: a message to the driver was lost: %s", r->opt->node,
                    rl_error_message());
    }
    r->st.sends_up++;
}

/* Up to S_DRAIN_MAX messages of one socket: the driver's go down to the
 * workers (and *heard, when given, becomes now), the workers' up. */
static void s_drain(s_relay *r, void *sock, int64_t now, int64_t *heard)
{
    for (int k = 0; k < S_DRAIN_MAX; k++) {
        s_message m;
        int e = s_recv(sock, &m);
        if (e == RL_ETIMEOUT)
            return;
        if (e) {
            r->st.dropped++;
            continue;
        }
        if (sock == r->back) {
            if (heard)
                *heard = now;
            s_down(r, &m);
        } else {
            s_up(r, &m, now);
        }
    }
}

static void s_sockopts(void *sock)
{
    int zero = 0, hwm = S_HWM;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    rl_net_limits(sock);
}

static int s_open(s_relay *r)
{
    const rl_relay_options *o = r->opt;
    r->ctx = zmq_ctx_new();
    r->front = r->ctx ? zmq_socket(r->ctx, ZMQ_ROUTER) : NULL;
    r->back = r->ctx ? zmq_socket(r->ctx, ZMQ_DEALER) : NULL;
    if (!r->front || !r->back)
        return rl_error_set(RL_EIO, "relay: zmq socket: %s", zmq_strerror(zmq_errno()));
    s_sockopts(r->front);
    s_sockopts(r->back);
    int one = 1;
    zmq_setsockopt(r->front, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(r->front, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    /* the identity the driver sees: mark, node, pid and a nonce, mark */
    unsigned char nonce[4];
    if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
        memset(nonce, 0, sizeof nonce); /* the pid still tells incarnations apart */
    char id[RL_MSG_RELAY_ID_MAX + 1];
    int n = snprintf(id, sizeof id, "%crelay:%.32s:%d.%02x%02x%02x%02x%c", RL_MSG_RELAY_MARK,
                     o->node, (int)getpid(), nonce[0], nonce[1], nonce[2], nonce[3],
                     RL_MSG_RELAY_MARK);
    if (n <= 0 || n >= (int)sizeof id)
        return rl_error_set(RL_EINVAL, "relay: node name '%s' is too long", o->node);
    zmq_setsockopt(r->back, ZMQ_ROUTING_ID, id, (size_t)n);
    if (o->driver_key) {
        int rc = s_private_dir(o->bind, r->dir, sizeof r->dir);
        if (rc) {
            r->dir[0] = '\0'; /* not ours to remove */
            return rc;
        }
        if ((rc = rl_net_curve_client(r->back, o->driver_key)))
            return rl_error_wrap(rc, "relay: the connection to the driver");
    }
    if (zmq_bind(r->front, o->bind) != 0)
        return rl_error_set(RL_EIO, "relay: cannot bind %s: %s", o->bind,
                            zmq_strerror(zmq_errno()));
    if (zmq_connect(r->back, o->driver) != 0)
        return rl_error_set(RL_EINVAL, "relay: cannot connect to the driver '%s': %s", o->driver,
                            zmq_strerror(zmq_errno()));
    return RL_OK;
}

static int s_check(const rl_relay_options *o)
{
    if (!o || !o->driver || !*o->driver)
        return rl_error_set(RL_EINVAL, "relay: no driver endpoint");
    if (!o->bind || !*o->bind)
        return rl_error_set(RL_EINVAL, "relay: no endpoint to bind for the workers");
    if (!o->node || !*o->node || strlen(o->node) > 32)
        return rl_error_set(RL_EINVAL, "relay: the node name must be 1 to 32 characters");
    for (const char *p = o->node; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return rl_error_set(RL_EINVAL, "relay: node name '%s': only letters, digits, _ - .",
                                o->node);
    if (o->give_up_ms < 0)
        return rl_error_set(RL_EINVAL, "relay: give-up of %d ms: expected >= 0", o->give_up_ms);
    if (o->hold_ms < 0 || o->hold_ms > 10000)
        return rl_error_set(RL_EINVAL, "relay: hold of %d ms: expected 0 to 10000", o->hold_ms);
    if (!o->stop)
        return rl_error_set(RL_EINVAL, "relay: no stop flag");
    if (o->driver_key && strlen(o->driver_key) != 40)
        return rl_error_set(RL_EINVAL, "relay: the driver key must be 40 Z85 characters, got %zu",
                            strlen(o->driver_key));
    return RL_OK;
}

int rl_relay_run(const rl_relay_options *opt, rl_relay_stats *stats)
{
    if (stats)
        memset(stats, 0, sizeof *stats);
    int rc = s_check(opt);
    if (rc)
        return rc;
    s_relay *r = calloc(1, sizeof *r);
    if (!r)
        return rl_error_set(RL_ENOMEM, "relay: out of memory");
    r->opt = opt;
    rc = s_open(r);
    if (rc == RL_OK)
        rl_log_info("relay for node %s: workers on %s, driver %s, replies held up to %d ms",
                    opt->node, opt->bind, opt->driver, opt->hold_ms);
    int64_t heard_ms = s_now_ms(); /* the driver's last message */
    while (rc == RL_OK && !*opt->stop) {
        int64_t now = s_now_ms();
        if (opt->give_up_ms > 0 && now - heard_ms > opt->give_up_ms) {
            rc = rl_error_set(RL_ETIMEOUT, "relay for node %s: nothing from the driver %s for "
                              "%.1f s: it is gone", opt->node, opt->driver,
                              opt->give_up_ms / 1000.0);
            break;
        }
        long timeout = 200; /* to see *stop */
        for (int i = 0; i < r->n_methods; i++)
            if (r->methods[i].n_held) {
                int64_t left = r->methods[i].first_held_ms + opt->hold_ms - now;
                if (left < timeout)
                    timeout = left > 0 ? (long)left : 0;
            }
        zmq_pollitem_t items[2] = {{r->front, 0, ZMQ_POLLIN, 0}, {r->back, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, timeout) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            rc = rl_error_set(RL_EIO, "relay: poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        now = s_now_ms();
        /* the driver's first: calls are tracked before their replies come */
        if (items[1].revents & ZMQ_POLLIN)
            s_drain(r, r->back, now, &heard_ms);
        if (items[0].revents & ZMQ_POLLIN)
            s_drain(r, r->front, now, NULL);
        for (int i = 0; i < r->n_methods; i++)
            if (r->methods[i].n_held && now - r->methods[i].first_held_ms >= opt->hold_ms)
                s_flush(r, &r->methods[i]);
    }
    s_flush_all(r);
    if (stats)
        *stats = r->st;
    rl_log_info("relay for node %s: stopped (%lld down, %lld up in %lld sends, %lld held, "
                "%lld dropped)", opt->node, (long long)r->st.down, (long long)r->st.up,
                (long long)r->st.sends_up, (long long)r->st.held, (long long)r->st.dropped);
    for (int i = 0; i < r->n_methods; i++) {
        for (int j = 0; j < r->methods[i].n_held; j++)
            s_message_close(&r->methods[i].held[j]);
        free(r->methods[i].held);
    }
    if (r->front)
        zmq_close(r->front);
    if (r->back)
        zmq_close(r->back);
    if (r->ctx)
        zmq_ctx_term(r->ctx);
    if (r->dir[0]) { /* the socket file went with the socket; the directory is ours */
        unlink(opt->bind + 6);
        rmdir(r->dir);
    }
    free(r);
    return rc;
}
