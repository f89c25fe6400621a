/* zuv.c — edge-triggered ZeroMQ fd polling in libuv (see common/runtime/zuv.h). */
#include "common/runtime/zuv.h"
#include "common/core/util.h"
#include "rlrt/error.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <zmq.h>

struct rl_zuv {
    uv_poll_t poll;
    uv_idle_t idle; /* one-shot drain after a kick */
    void *zsock;
    rl_zuv_readable_fn cb;
    void *arg;
    void (*lock)(void *);   /* optional: held around each drain */
    void (*unlock)(void *);
    int closing;
    int draining; /* inside s_drain: a kick is implied by its final EAGAIN */
    int open_handles;
    int zfd;      /* the socket's ZMQ_FD */
    int gate;     /* gated: an epoll fd holding zfd while open (else -1) */
    int gate_open;
};

int rl_zuv_pending(void *zsock)
{
    int events = 0;
    size_t len = sizeof events;
    return zmq_getsockopt(zsock, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN);
}

static void s_drain(rl_zuv *w)
{
    if (w->lock)
        w->lock(w->arg);
    /* Bounded so one busy socket cannot starve timers and signals. */
    int n = 0;
    w->draining = 1;
    for (; n < 256 && !w->closing; n++)
        if (!w->cb(w->zsock, w->arg))
            break;
    w->draining = 0;
    if (w->unlock)
        w->unlock(w->arg);
    if (n == 256 && !w->closing)
        rl_zuv_kick(w); /* more may be pending: come back next iteration */
}

static void s_on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    s_drain(h->data);
}

static void s_on_idle(uv_idle_t *h)
{
    rl_zuv *w = h->data;
    uv_idle_stop(h);
    s_drain(w);
}

rl_zuv *rl_zuv_start(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg)
{
    return rl_zuv_start_locked(loop, zsock, cb, arg, NULL, NULL);
}

static rl_zuv *s_start(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg,
                       void (*lock)(void *), void (*unlock)(void *), int gated);

rl_zuv *rl_zuv_start_locked(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg,
                            void (*lock)(void *), void (*unlock)(void *))
{
    return s_start(loop, zsock, cb, arg, lock, unlock, 0);
}

rl_zuv *rl_zuv_start_gated(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg,
                           void (*lock)(void *), void (*unlock)(void *))
{
    return s_start(loop, zsock, cb, arg, lock, unlock, 1);
}

static rl_zuv *s_start(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg,
                       void (*lock)(void *), void (*unlock)(void *), int gated)
{
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(zsock, ZMQ_FD, &fd, &len) != 0) {
        rl_error_set(RL_EIO, "zmq_getsockopt(ZMQ_FD): %s", zmq_strerror(zmq_errno()));
        return NULL;
    }
    rl_zuv *w = rl_zalloc(sizeof *w, "zuv");
    if (!w)
        return NULL;
    w->zsock = zsock;
    w->cb = cb;
    w->arg = arg;
    w->lock = lock;
    w->unlock = unlock;
    w->zfd = fd;
    w->gate = -1;
    if (gated) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        w->gate = epoll_create1(EPOLL_CLOEXEC);
        if (w->gate < 0 || epoll_ctl(w->gate, EPOLL_CTL_ADD, fd, &ev) != 0) {
            if (w->gate >= 0)
                close(w->gate);
            free(w);
            rl_error_set(RL_EIO, "epoll for the ZeroMQ fd failed");
            return NULL;
        }
        w->gate_open = 1;
    }
    if (uv_poll_init(loop, &w->poll, gated ? w->gate : fd) != 0) {
        if (w->gate >= 0)
            close(w->gate);
        free(w);
        rl_error_set(RL_EIO, "uv_poll_init on the ZeroMQ fd failed");
        return NULL;
    }
    uv_idle_init(loop, &w->idle);
    w->poll.data = w->idle.data = w;
    w->open_handles = 2;
    uv_poll_start(&w->poll, UV_READABLE, s_on_poll);
    rl_zuv_kick(w); /* input may already be queued */
    return w;
}

void rl_zuv_kick(rl_zuv *w)
{
    /* A send from a callback needs no extra pass: the drain goes on until a
     * receive fails with EAGAIN, which processes the socket's commands after
     * that send (or it kicks itself when it stops at its bound). */
    if (w && !w->closing && !w->draining)
        uv_idle_start(&w->idle, s_on_idle);
}

static void s_on_close(uv_handle_t *h)
{
    rl_zuv *w = h->data;
    if (--w->open_handles == 0) {
        if (w->gate >= 0)
            close(w->gate); /* after libuv stopped polling it */
        free(w);
    }
}

int rl_zuv_fd(const rl_zuv *w) { return w ? w->zfd : -1; }

int rl_zuv_gate(rl_zuv *w, int open)
{
    if (!w || w->gate < 0 || w->closing)
        return RL_ESTATE;
    open = open != 0;
    if (w->gate_open == open)
        return RL_OK;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = w->zfd};
    if (epoll_ctl(w->gate, open ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, w->zfd, &ev) != 0)
        return RL_EIO; /* no message: the caller keeps the gate as it was */
    w->gate_open = open;
    return RL_OK;
}

void rl_zuv_stop(rl_zuv *w)
{
    if (!w || w->closing)
        return;
    w->closing = 1;
    uv_poll_stop(&w->poll);
    uv_idle_stop(&w->idle);
    uv_close((uv_handle_t *)&w->poll, s_on_close);
    uv_close((uv_handle_t *)&w->idle, s_on_close);
}
