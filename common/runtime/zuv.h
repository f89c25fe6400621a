/* common/runtime/zuv.h — ZeroMQ sockets inside a libuv event loop.
 *
 * Purpose: the daemons run one libuv loop on their main thread (signals,
 * timers, child processes) and poll their ZeroMQ sockets through it. A ZeroMQ
 * socket exposes ZMQ_FD, which is EDGE-triggered: it becomes readable when the
 * socket's state changed, and every zmq_send/zmq_recv may consume that edge.
 * So the watcher drains: on every wake-up it calls the callback until the
 * callback finds nothing to receive (a ZMQ_DONTWAIT receive failing with
 * EAGAIN, which also processes every pending command of the socket, so the
 * next input raises a new edge; no ZMQ_EVENTS query per message); and after
 * the program sends on the socket it must call rl_zuv_kick(), which drains
 * once more on the next loop iteration (a send may have pulled pending input
 * into the socket without a new edge).
 *
 * Invariants: the callback must consume at most one message (all its
 * frames) per call, receiving with ZMQ_DONTWAIT, and return 1 when it got
 * one, 0 when there was none (EAGAIN). The watcher touches the socket only on the loop's thread, and
 * with rl_zuv_start_locked() only inside lock(arg) ... unlock(arg) (the
 * callback runs with the lock held). That lets another thread send on the
 * same socket under the same lock: ZeroMQ sockets may be used from several
 * threads one at a time (the mutex gives the memory barrier). Such a thread
 * cannot call rl_zuv_kick(); after its send it checks rl_zuv_pending() and,
 * when input is pending, wakes the loop (e.g. uv_async_send) whose callback
 * calls rl_zuv_kick(). Input that arrives later raises a new edge.
 *
 * Ownership: rl_zuv_start() returns a watcher owned by the caller; stop it
 * with rl_zuv_stop(), which frees it once libuv has closed its handles (the
 * socket itself stays the caller's).
 */
#ifndef RLRT_RUNTIME_ZUV_H
#define RLRT_RUNTIME_ZUV_H

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*rl_zuv_readable_fn)(void *zsock, void *arg);

typedef struct rl_zuv rl_zuv;

rl_zuv *rl_zuv_start(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg);
/* The same, with lock(arg)/unlock(arg) held around every drain. */
rl_zuv *rl_zuv_start_locked(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg,
                            void (*lock)(void *), void (*unlock)(void *));
/* The same, gated: the loop polls an epoll fd that holds the socket's
 * ZMQ_FD only while the gate is open (at start). Another thread may close
 * the gate (rl_zuv_gate(w, 0), under the lock), wait on rl_zuv_fd() itself
 * and receive, so that the loop does not wake for that input; opening the
 * gate again (epoll_ctl, no wake-up unless input is pending) hands input
 * back to the loop. The loop may still drain while the gate is closed
 * (after rl_zuv_kick). Linux only (epoll). */
rl_zuv *rl_zuv_start_gated(uv_loop_t *loop, void *zsock, rl_zuv_readable_fn cb, void *arg,
                           void (*lock)(void *), void (*unlock)(void *));
/* Opens (1) or closes (0) the gate of a gated watcher; under its lock.
 * RL_OK, or an error code (not gated, stopping, epoll_ctl failed) with the
 * gate left as it was; sets no error message. */
int rl_zuv_gate(rl_zuv *w, int open);
/* The socket's ZMQ_FD (-1 for NULL). */
int rl_zuv_fd(const rl_zuv *w);
/* 1 when zsock has a message to receive (ZMQ_EVENTS & ZMQ_POLLIN); the
 * caller must be allowed to use the socket (its thread, or its lock held). */
int rl_zuv_pending(void *zsock);
/* Schedules a drain on the next loop iteration (call after sending). */
void rl_zuv_kick(rl_zuv *w);
void rl_zuv_stop(rl_zuv *w);

#ifdef __cplusplus
}
#endif
#endif
