/* driver.c — the driver object: construction, the I/O thread that runs
 * the libuv loop, waits on the condition variable, start, shutdown and free
 * (see rlrt/runtime/driver.h; the other parts are launcher.c, protocol.c and
 * dispatch.c, sharing driver_internal.h). */
#include "driver_internal.h"

#include "rlrt/error.h"
#include "rlrt/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

void rl_drv_lock(rl_driver *d) { pthread_mutex_lock(&d->mu); }

void rl_drv_unlock(rl_driver *d)
{
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

void rl_drv_wake(rl_driver *d) { uv_async_send(&d->wake); }

/* Waits (holding d->mu, released while blocked) until cond(arg) holds, the
 * timeout passes, the job is interrupted or fatal. Returns 0, RL_ETIMEOUT or
 * RL_ESTATE (message set). The I/O thread does the work meanwhile. */
int rl_drv_wait_until(rl_driver *d, int (*cond)(void *), void *arg, int timeout_ms)
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
    rl_drv_lock(d);
    int rc = rl_drv_wait_until(d, s_false, NULL, timeout_ms);
    rl_drv_unlock(d);
    return rc == RL_ETIMEOUT ? RL_OK : rc;
}

static void s_on_signal(uv_signal_t *h, int signum)
{
    rl_driver *d = h->data;
    rl_drv_lock(d);
    if (!d->interrupted)
        rl_log_warn("%s: stopping the job", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    d->interrupted = signum;
    rl_drv_unlock(d);
}

/* I/O thread: work requested by the API thread. */
static void s_on_wake(uv_async_t *a)
{
    rl_driver *d = a->data;
    rl_drv_lock(d);
    if (d->start_requested == 1) {
        rl_drv_launch_all(d);
        d->start_requested = 2;
    }
    if (d->shutdown_requested == 1) {
        rl_drv_send_shutdown(d);
        d->shutdown_requested = 2;
    }
    if (d->kill_requested) {
        for (int i = 0; i < d->n_slots; i++)
            if (d->slots[i].proc_running)
                uv_process_kill(&d->slots[i].proc, SIGKILL);
        d->kill_requested = 0;
    }
    rl_drv_send_queued(d);
    if (d->quit)
        uv_stop(&d->loop);
    rl_drv_unlock(d);
}

static void *s_io_main(void *arg)
{
    rl_driver *d = arg;
    uv_run(&d->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- construction ---------------------------------------------------------------- */

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
    d->watch = rl_zuv_start(&d->loop, d->router, rl_drv_on_readable, d);

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
                                    sizeof(rl_drv_slot *));
    }
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
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
    uv_timer_start(&d->hb_timer, rl_drv_on_heartbeat, (uint64_t)d->interval_ms, (uint64_t)d->interval_ms);
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
    rl_drv_lock((rl_driver *)d);
    int v = d->interrupted;
    rl_drv_unlock((rl_driver *)d);
    return v;
}

const char *rl_driver_fatal(const rl_driver *d) { return d->fatal[0] ? d->fatal : NULL; }

void rl_driver_call_time(const rl_driver *d, double *wall_s, double *compute_s, int64_t *calls)
{
    rl_drv_lock((rl_driver *)d);
    if (wall_s)
        *wall_s = d->calls_wall_s;
    if (compute_s)
        *compute_s = d->calls_compute_s;
    if (calls)
        *calls = d->calls_done;
    rl_drv_unlock((rl_driver *)d);
}

int rl_driver_restarts(const rl_driver *d)
{
    rl_drv_lock((rl_driver *)d);
    int v = d->total_restarts;
    rl_drv_unlock((rl_driver *)d);
    return v;
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
    rl_drv_lock(d);
    d->start_requested = 1;
    rl_drv_wake(d);
    int rc = rl_drv_wait_until(d, s_started, d, -1);
    if (!rc && d->start_error[0])
        rc = rl_error_set(RL_EIO, "%s", d->start_error);
    if (!rc)
        rc = rl_drv_wait_ready(d, NULL, timeout);
    rl_drv_unlock(d);
    return rc;
}

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

int rl_driver_shutdown(rl_driver *d, int timeout_ms)
{
    rl_drv_lock(d);
    d->shutting_down = 1;
    d->shutdown_requested = 1;
    rl_drv_wake(d);
    /* neither a second signal nor a fatal error may cut the wait short */
    int saved = d->interrupted;
    char fatal[sizeof d->fatal];
    memcpy(fatal, d->fatal, sizeof fatal);
    d->interrupted = 0;
    d->fatal[0] = '\0';
    int rc = rl_drv_wait_until(d, s_children_gone, d, timeout_ms);
    if (rc == RL_ETIMEOUT) {
        for (int i = 0; i < d->n_slots; i++)
            if (d->slots[i].proc_running)
                rl_log_warn("%s did not exit in %.1f s: SIGKILL", d->slots[i].label,
                            timeout_ms / 1000.0);
        d->kill_requested = 1;
        rl_drv_wake(d);
        d->interrupted = 0;
        rl_drv_wait_until(d, s_children_gone, d, 2000);
        d->child_failures++;
    }
    memcpy(d->fatal, fatal, sizeof fatal);
    d->interrupted = saved;
    for (int i = 0; i < d->n_slots; i++)
        d->slots[i].has_id = 0;
    rc = d->child_failures ? rl_error_set(RL_EPEER, "%d worker(s) did not exit cleanly",
                                          d->child_failures)
                           : RL_OK;
    rl_drv_unlock(d);
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
    rl_drv_lock(d);
    d->quit = 1;
    rl_drv_unlock(d);
    rl_drv_wake(d);
    pthread_join(d->io_thread, NULL);
    /* the I/O thread is gone: this thread may use the loop now */
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        if (s->proc_running)
            uv_process_kill(&s->proc, SIGKILL);
        while (s->calls) {
            rl_drv_subcall *c = s->calls;
            s->calls = c->next;
            rl_drv_subcall_free(c);
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
