/* abort.c — the process's abort epoch (see abort.h). */
#include "common/runtime/abort.h"

#include "rlrt/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static _Atomic uint64_t s_epoch = 1;
static _Thread_local uint64_t s_scope; /* 0: this thread runs no call */
static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static char s_why[256] = "no reason given";

uint64_t rl_abort_epoch(void) { return atomic_load_explicit(&s_epoch, memory_order_acquire); }

uint64_t rl_abort_count(void) { return rl_abort_epoch() - 1; }

void rl_abort_raise(const char *why)
{
    pthread_mutex_lock(&s_mu);
    snprintf(s_why, sizeof s_why, "%s", why && why[0] ? why : "no reason given");
    /* under the lock: a wait that sees the new epoch reads this reason */
    atomic_fetch_add_explicit(&s_epoch, 1, memory_order_acq_rel);
    pthread_mutex_unlock(&s_mu);
}

void rl_abort_scope_set(uint64_t epoch) { s_scope = epoch; }

uint64_t rl_abort_base(void) { return s_scope ? s_scope : rl_abort_epoch(); }

int rl_abort_pending(uint64_t base) { return rl_abort_epoch() > base; }

int rl_abort_check(uint64_t base, const char *what)
{
    if (!rl_abort_pending(base))
        return RL_OK;
    char why[sizeof s_why];
    pthread_mutex_lock(&s_mu);
    snprintf(why, sizeof why, "%s", s_why);
    pthread_mutex_unlock(&s_mu);
    return rl_error_set(RL_EPEER, "%s: aborted: %s", what, why);
}
