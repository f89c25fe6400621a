/* workers/selftest/test_methods.h — the methods the selftest recipe and the
 * runtime's tests call on every role of rl-worker.
 *
 * Purpose: plumbing checks that need no model: echo, add (x + meta.value),
 * sleep (meta.ms), fail (always an error), whoami, and the checks of the
 * collectives (comm_id_create, coll_check), the weight channel
 * (weights_open/weights_send/weights_recv/weights_check) and the direct data channels
 * (channel_open/channel_connect/channel_pingpong). They are part of the
 * rl-worker binary, not of librlrt, and a worker serves them only when the
 * driver's CONFIGURE asks for them (rl_driver_options.test_methods, set by
 * the selftest recipe): a production job's worker does not know them.
 *
 * Arguments and results travel as meta of 0-row DataProtos; each method's
 * comment in test_methods.c lists its keys. A role's own method of the same
 * name wins over a test method.
 *
 * Threading and ownership: handlers run on the worker's compute thread, one
 * at a time. The weight and data channel checks keep per-process state (a
 * worker process serves one role and rank); it lives until the process
 * exits.
 */
#ifndef RLRT_WORKERS_SELFTEST_TEST_METHODS_H
#define RLRT_WORKERS_SELFTEST_TEST_METHODS_H

#include "rlrt/runtime/worker.h"

/* Terminated by {NULL, NULL}. */
extern const rl_method rl_test_methods[];
/* The stateless ones (echo, echo_queued, add, sleep_safe, whoami, fail), NULL-terminated:
 * the driver may re-run them on a restarted worker. */
extern const char *const rl_test_retry_safe[];
/* The cheap ones (echo, fail), NULL-terminated: run on the worker's I/O
 * thread when its compute thread is idle (rl_worker_options.test_inline).
 * echo_queued is echo without that: the compute thread's path. */
extern const char *const rl_test_inline[];

#endif
