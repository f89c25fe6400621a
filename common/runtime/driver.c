/* driver.c — the driver object: construction, the I/O thread that runs
 * the libuv loop, waits on the condition variable, start, shutdown and free
 * (see rlrt/runtime/driver.h; the other parts are launcher.c, protocol.c and
 * dispatch.c, sharing driver_internal.h). */
#include "common/runtime/driver_internal.h"

#include "common/core/util.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/health.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <time.h>
#include <zmq.h>

static _Thread_local int s_io_thread;

int rl_drv_on_io_thread(void) { return s_io_thread; }

uint64_t rl_drv_now_ms(rl_driver *d)
{
    return s_io_thread ? uv_now(&d->loop) : uv_hrtime() / 1000000;
}

void rl_drv_lock(rl_driver *d) { pthread_mutex_lock(&d->mu); }

static void s_lock_cb(void *arg)
{
    rl_driver *d = arg;
    rl_drv_lock(d);
    d->drain_wake = 0;
}

/* The end of a drain: no wake-up when nothing a wait could be for happened
 * (see drain_wake). */
static void s_unlock_cb(void *arg)
{
    rl_driver *d = arg;
    if (d->drain_wake)
        rl_drv_unlock(d);
    else
        pthread_mutex_unlock(&d->mu);
}

void rl_drv_unlock(rl_driver *d)
{
    /* unlock first: a woken waiter must not find the mutex still held (it
     * would sleep once more on it, a second wake-up per reply) */
    pthread_mutex_unlock(&d->mu);
    pthread_cond_broadcast(&d->cv);
}

void rl_drv_wake(rl_driver *d) { uv_async_send(&d->wake); }

void rl_drv_set_fatal(rl_driver *d, const char *fmt, ...)
{
    if (d->fatal[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->fatal, sizeof d->fatal, fmt, ap);
    va_end(ap);
    rl_log_error("%s", d->fatal);
    rl_drv_fail_all_queued(d);
}

int rl_drv_wait_until(rl_driver *d, int (*cond)(void *), void *arg, int timeout_ms, int always)
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
        if (!always && d->interrupted)
            return rl_error_set(RL_ESTATE, "interrupted by %s",
                                d->interrupted == SIGTERM ? "SIGTERM" : "SIGINT");
        if (!always && d->fatal[0])
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
    int rc = rl_drv_wait_until(d, s_false, NULL, timeout_ms, 0);
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

static void s_on_launch_timer(uv_timer_t *t);

/* I/O thread: a batch of slots; the next one after the loop has answered
 * what arrived meanwhile (a 0 ms timer runs after the next poll). */
static void s_launch_step(rl_driver *d)
{
    if (rl_drv_launch_some(d))
        d->start_requested = 2;
    else
        uv_timer_start(&d->launch_timer, s_on_launch_timer, 0, 0);
}

static void s_on_launch_timer(uv_timer_t *t)
{
    rl_driver *d = t->data;
    rl_drv_lock(d);
    if (d->start_requested == 1)
        s_launch_step(d);
    rl_drv_unlock(d);
}

/* I/O thread: work requested by the API thread. */
static void s_on_wake(uv_async_t *a)
{
    rl_driver *d = a->data;
    rl_drv_lock(d);
    if (d->start_requested == 1 && !uv_is_active((uv_handle_t *)&d->launch_timer))
        s_launch_step(d);
    if (d->shutdown_requested == 1) {
        rl_drv_send_shutdown(d);
        d->shutdown_requested = 2;
    }
    if (d->kill_requested) {
        for (int i = 0; i < d->n_slots; i++)
            if (d->slots[i].proc_running)
                uv_process_kill(&d->slots[i].proc, SIGKILL);
        rl_drv_relays_signal(d, SIGKILL);
        d->kill_requested = 0;
    }
    rl_drv_relays_stop_if_done(d);
    rl_drv_send_queued(d);
    rl_zuv_kick(d->watch); /* an API thread's send may have taken an edge */
    if (d->quit)
        uv_stop(&d->loop);
    rl_drv_unlock(d);
}

static void *s_io_main(void *arg)
{
    rl_driver *d = arg;
    s_io_thread = 1;
    uv_run(&d->loop, UV_RUN_DEFAULT);
    return NULL;
}


/* ---- recovery --------------------------------------------------------------------- */

static double s_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void rl_drv_recovery_begin(rl_drv_slot *s, const char *why)
{
    rl_driver *d = s->d;
    if (!d->recovering_ms) {
        d->recovering_ms = uv_hrtime() / 1000000;
        d->recovering_wall_s = s_wall_s();
        d->recovering_slots[0] = '\0';
        snprintf(d->recovering_why, sizeof d->recovering_why, "%s %s", s->label, why);
    }
    size_t n = strlen(d->recovering_slots), l = strlen(s->label);
    int listed = 0;
    for (const char *p = d->recovering_slots; !listed && (p = strstr(p, s->label)); p += l)
        listed = (p == d->recovering_slots || p[-1] == ' ') && (p[l] == ',' || p[l] == '\0');
    if (!listed) {
        snprintf(d->recovering_slots + n, sizeof d->recovering_slots - n, "%s%s", n ? ", " : "",
                 s->label);
    }
}

static int s_all_ready(const rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++)
        if (d->slots[i].state != RL_SLOT_READY)
            return 0;
    return 1;
}

/* The recovery under way is over (`what` ended it). */
static void s_recovery_end(rl_driver *d, const char *what)
{
    double took = (double)(uv_hrtime() / 1000000 - d->recovering_ms) / 1e3;
    d->recoveries++;
    d->recovery_s_last = took;
    d->recovery_s_total += took;
    d->recovering_ms = 0;
    rl_log_warn("recovered from the loss of %s in %.2f s (%s)", d->recovering_slots, took, what);
}

void rl_drv_recovery_ready(rl_driver *d)
{
    if (d->recovering_ms && d->steps == 0 && s_all_ready(d))
        s_recovery_end(d, "every worker is ready again");
}

/* ---- HTTP: /healthz, /healthz/ready, /metrics (the server's thread) ---------- */

/* `v` as a JSON string: printable ASCII, quotes and backslashes escaped,
 * anything else as '?' (it may come from a worker's message). */
static void s_json_str(rl_text *t, const char *v)
{
    rl_text_put(t, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            rl_text_printf(t, "\\%c", *p);
        else
            rl_text_printf(t, "%c", *p >= 0x20 && *p < 0x7f ? *p : '?');
    }
    rl_text_put(t, "\"", 1);
}

/* ISO 8601 UTC with milliseconds, as the logs write time. */
static void s_iso_time(double wall_s, char *buf, size_t size)
{
    time_t secs = (time_t)wall_s;
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, size - n, ".%03dZ", (int)((wall_s - (double)secs) * 1000.0));
}

static const char *s_state_name(rl_drv_slot_state st)
{
    switch (st) {
    case RL_SLOT_DOWN: return "down";
    case RL_SLOT_STARTING: return "starting";
    case RL_SLOT_CONFIGURING: return "configuring";
    case RL_SLOT_READY: return "ready";
    case RL_SLOT_FAILED: return "failed";
    }
    return "?";
}

static int s_http(void *arg, const char *path, char **body, const char **type)
{
    rl_driver *d = arg;
    uint64_t now = uv_hrtime() / 1000000;
    rl_text t = {0};
    int status = 200;
    rl_drv_lock(d);
    int all_ready = d->n_slots > 0, in_flight = 0;
    for (int i = 0; i < d->n_slots; i++) {
        all_ready &= d->slots[i].state == RL_SLOT_READY;
        for (rl_drv_subcall *c = d->slots[i].calls; c; c = c->next)
            in_flight++;
    }
    double loop_age = d->last_hb_ms ? (double)(now > d->last_hb_ms ? now - d->last_hb_ms : 0) / 1e3 : 0;
    int alive = !d->fatal[0] && !d->shutting_down &&
                loop_age < 3.0 * d->interval_ms / 1000.0 + 1.0;
    int ready = alive && d->started && all_ready;
    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/healthz/ready") == 0) {
        status = (strcmp(path, "/healthz") == 0 ? alive : ready) ? 200 : 503;
        rl_text_printf(&t, "{\"status\": \"%s\", \"role\": \"driver\", \"job\": \"%s\", "
                       "\"ready\": %s, \"stepping\": %s, \"step\": %lld, "
                       "\"last_heartbeat_s\": %.3f, \"fatal\": %s%s%s, ",
                       status != 200 ? "unhealthy" : d->recovering_ms ? "recovering" : "ok",
                       d->job_id, ready ? "true" : "false",
                       in_flight ? "true" : "false", (long long)d->step, loop_age,
                       d->fatal[0] ? "\"" : "", d->fatal[0] ? "see the driver's log" : "null",
                       d->fatal[0] ? "\"" : "");
        /* a worker was lost: which, since when, why (until a step completes) */
        if (d->recovering_ms) {
            char since[40];
            s_iso_time(d->recovering_wall_s, since, sizeof since);
            rl_text_printf(&t, "\"recovery\": {\"slots\": ");
            s_json_str(&t, d->recovering_slots);
            rl_text_printf(&t, ", \"since\": \"%s\", \"seconds\": %.3f, \"why\": ", since,
                           (double)(now > d->recovering_ms ? now - d->recovering_ms : 0) / 1e3);
            s_json_str(&t, d->recovering_why);
            rl_text_printf(&t, "}, ");
        } else {
            rl_text_printf(&t, "\"recovery\": null, ");
        }
        rl_text_printf(&t, "\"recoveries\": %lld, \"last_recovery_s\": %.3f, \"workers\": [",
                       (long long)d->recoveries, d->recovery_s_last);
        for (int i = 0; i < d->n_slots; i++) {
            rl_drv_slot *s = &d->slots[i];
            double seen = s->last_seen ? (double)(now > s->last_seen ? now - s->last_seen : 0) / 1e3 : -1;
            rl_text_printf(&t, "%s{\"slot\": \"%s\", \"state\": \"%s\", \"last_heartbeat_s\": %.3f, "
                           "\"restarts\": %d, \"pid\": %ld, \"call\": ", i ? ", " : "", s->label,
                           s_state_name(s->state), seen, s->restarts,
                           s->proc_pid ? (long)s->proc_pid : s->worker_pid);
            /* the method of the oldest call it runs (what phase it is in) */
            const rl_drv_subcall *c = s->calls;
            while (c && !c->sent)
                c = c->next;
            if (c && c->f)
                s_json_str(&t, c->f->method);
            else
                rl_text_printf(&t, "null");
            rl_text_printf(&t, "}");
        }
        rl_text_printf(&t, "]}\n");
        *type = "application/json";
    } else if (strcmp(path, "/metrics") == 0) {
        const char *L = "role=\"driver\",rank=\"0\"";
        rl_text_metric(&t, "rlrt_up", "gauge", "1 while the daemon runs", L, 1);
        rl_text_metric(&t, "rlrt_ready", "gauge", "1 while every worker is ready", L, ready);
        rl_text_metric(&t, "rlrt_calls_total", "counter", "calls completed", L, (double)d->calls_done);
        rl_text_metric(&t, "rlrt_call_seconds_total", "counter",
                       "wall time of completed calls (issue to last reply)", L, d->calls_wall_s);
        rl_text_metric(&t, "rlrt_handler_seconds_total", "counter",
                       "the slowest rank's handler time of completed calls", L, d->calls_compute_s);
        rl_text_metric(&t, "rlrt_received_bytes_total", "counter", "control-plane bytes in", L,
                       (double)d->bytes_in);
        rl_text_metric(&t, "rlrt_sent_bytes_total", "counter", "control-plane bytes out", L,
                       (double)d->bytes_out);
        rl_text_metric(&t, "rlrt_refused_total", "counter",
                       "HELLOs and messages refused (wrong job, token, version, slot)", L,
                       (double)d->refused);
        rl_text_metric(&t, "rlrt_restarts_total", "counter", "worker restarts", L,
                       (double)d->total_restarts);
        rl_text_metric(&t, "rlrt_queue_depth", "gauge", "calls queued or in flight", L, in_flight);
        rl_text_metric(&t, "rlrt_step", "gauge", "last step the recipe reported", L, (double)d->step);
        rl_text_metric(&t, "rlrt_step_seconds", "gauge", "wall time of that step", L, d->step_s);
        rl_text_metric(&t, "rlrt_step_seconds_total", "counter", "wall time of every step", L,
                       d->steps_s_total);
        rl_text_metric(&t, "rlrt_steps_total", "counter", "steps reported", L, (double)d->steps);
        rl_text_metric(&t, "rlrt_recovering", "gauge",
                       "1 from a worker's loss until a step completes with every worker ready", L,
                       d->recovering_ms != 0);
        rl_text_metric(&t, "rlrt_recoveries_total", "counter", "recoveries completed", L,
                       (double)d->recoveries);
        rl_text_metric(&t, "rlrt_recovery_seconds_total", "counter",
                       "seconds of every completed recovery (worker lost to the next step)", L,
                       d->recovery_s_total);
        rl_text_metric(&t, "rlrt_recovery_seconds", "gauge", "seconds of the last recovery", L,
                       d->recovery_s_last);
        rl_text_metric(&t, "rlrt_weight_version", "gauge",
                       "latest weight version this process sent or received (0: none)", L,
                       (double)rl_weight_channel_version());
        static const char *const names[][3] = {
            {"rlrt_worker_ready", "gauge", "1 while the slot's worker is ready"},
            {"rlrt_worker_calls_total", "counter", "calls the slot's workers answered"},
            {"rlrt_worker_call_errors_total", "counter", "calls of the slot that failed"},
            {"rlrt_worker_handler_seconds_total", "counter", "handler time the workers reported"},
            {"rlrt_worker_restarts_total", "counter", "restarts of the slot"},
            {"rlrt_worker_queue_depth", "gauge", "calls queued or in flight on the slot"},
            {"rlrt_worker_last_heartbeat_seconds", "gauge", "seconds since the worker was heard"},
        };
        for (int k = 0; k < 7; k++) {
            for (int i = 0; i < d->n_slots; i++) {
                rl_drv_slot *s = &d->slots[i];
                char lab[160];
                snprintf(lab, sizeof lab, "role=\"%s\",rank=\"%d\"", d->groups[s->group].name,
                         s->rank);
                int q = 0;
                for (rl_drv_subcall *c = s->calls; c; c = c->next)
                    q++;
                double v = k == 0   ? s->state == RL_SLOT_READY
                           : k == 1 ? (double)s->calls_ok
                           : k == 2 ? (double)s->calls_failed
                           : k == 3 ? s->handler_s
                           : k == 4 ? s->restarts
                           : k == 5 ? q
                                    : (s->last_seen ? (double)(now > s->last_seen ? now - s->last_seen : 0) / 1e3 : -1);
                rl_text_metric(&t, names[k][0], names[k][1], i ? NULL : names[k][2], lab, v);
            }
        }
        *type = "text/plain; version=0.0.4";
    } else {
        status = 404;
        rl_text_printf(&t, "not found: %.100s (try /healthz, /healthz/ready, /metrics)\n", path);
    }
    rl_drv_unlock(d);
    if (t.failed) {
        free(t.buf);
        return 500;
    }
    *body = t.buf;
    return status;
}

void rl_driver_note_step(rl_driver *d, int64_t step, double seconds)
{
    rl_drv_lock(d);
    d->step = step;
    d->step_s = seconds;
    d->steps_s_total += seconds;
    d->steps++;
    if (d->recovering_ms && s_all_ready(d)) {
        char what[64];
        snprintf(what, sizeof what, "to step %lld", (long long)step);
        s_recovery_end(d, what);
    }
    rl_drv_unlock(d);
}

int rl_driver_http_port(const rl_driver *d) { return rl_http_port(d->http); }

int64_t rl_group_incarnation(const rl_group *g, int rank)
{
    if (!g || rank < 0 || rank >= g->size)
        return 0;
    rl_drv_lock(g->d);
    int64_t v = g->ranks[rank]->incarnation;
    rl_drv_unlock(g->d);
    return v;
}

/* ---- construction ---------------------------------------------------------------- */

/* "a, b, c" of the cluster's role names. */
static void s_role_list(const rl_cluster *cl, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int r = 0; r < cl->n_roles && n + 1 < size; r++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", r ? ", " : "", cl->roles[r].name);
    if (!cl->n_roles)
        snprintf(buf, size, "none");
}

/* Which cluster roles this job starts: started[r] = 1. RL_ECONFIG when the
 * options list a role the cluster lacks or that has no ranks. */
static int s_pick_roles(const rl_driver_options *opt, int *started)
{
    const rl_cluster *cl = opt->cluster;
    char known[1024];
    for (int r = 0; r < cl->n_roles; r++)
        started[r] = opt->roles ? 0 : cl->roles[r].count > 0;
    for (const char *const *name = opt->roles; name && *name; name++) {
        int r = rl_cluster_role_index(cl, *name);
        if (r < 0) {
            s_role_list(cl, known, sizeof known);
            return rl_error_set(RL_ECONFIG, "%s has no role '%s', which this job needs (roles: %s)",
                                cl->file, *name, known);
        }
        if (cl->roles[r].count == 0)
            return rl_error_set(RL_ECONFIG, "%s:%d: role '%s' has no ranks (count: 0), but this "
                                "job needs it", cl->file, cl->roles[r].line, *name);
        started[r] = 1;
    }
    for (int r = 0; r < cl->n_roles; r++)
        if (!started[r] && cl->roles[r].count > 0)
            rl_log_info("cluster role %s (%d rank%s) is not used by this job: not started",
                        cl->roles[r].name, cl->roles[r].count, cl->roles[r].count == 1 ? "" : "s");
    return RL_OK;
}

/* Slots and groups of the started roles. */
static int s_build_slots(rl_driver *d, const int *started)
{
    const rl_cluster *cl = d->cl;
    d->group_of_role = malloc(sizeof *d->group_of_role * (size_t)(cl->n_roles ? cl->n_roles : 1));
    d->groups = calloc((size_t)(cl->n_roles ? cl->n_roles : 1), sizeof *d->groups);
    d->slots = calloc((size_t)(cl->n_placements ? cl->n_placements : 1), sizeof *d->slots);
    if (!d->group_of_role || !d->groups || !d->slots)
        return rl_error_set(RL_ENOMEM, "driver: out of memory");
    for (int r = 0; r < cl->n_roles; r++) {
        d->group_of_role[r] = -1;
        if (!started[r])
            continue;
        rl_group *g = &d->groups[d->n_groups];
        g->d = d;
        g->role = r;
        g->name = cl->roles[r].name;
        g->size = cl->roles[r].count;
        g->ranks = calloc((size_t)g->size, sizeof *g->ranks);
        if (!g->ranks)
            return rl_error_set(RL_ENOMEM, "driver: out of memory");
        d->group_of_role[r] = d->n_groups++;
    }
    for (int i = 0; i < cl->n_placements; i++) {
        const rl_placement *pl = &cl->placements[i];
        if (pl->role < 0 || pl->role >= cl->n_roles || d->group_of_role[pl->role] < 0)
            continue;
        rl_group *g = &d->groups[d->group_of_role[pl->role]];
        if (pl->rank < 0 || pl->rank >= g->size || pl->node < 0 || pl->node >= cl->n_nodes ||
            g->ranks[pl->rank])
            return rl_error_set(RL_EINVAL, "driver: placement %d of %s is inconsistent", i,
                                cl->file);
        rl_drv_slot *s = &d->slots[d->n_slots++];
        s->d = d;
        s->group = d->group_of_role[pl->role];
        s->rank = pl->rank;
        s->pl = pl;
        s->node = &cl->nodes[pl->node];
        snprintf(s->label, sizeof s->label, "%s/%d", g->name, pl->rank);
        g->ranks[pl->rank] = s;
    }
    for (int k = 0; k < d->n_groups; k++)
        for (int r = 0; r < d->groups[k].size; r++)
            if (!d->groups[k].ranks[r])
                return rl_error_set(RL_EINVAL, "driver: %s has no placement for %s/%d", cl->file,
                                    d->groups[k].name, r);
    return RL_OK;
}

/* Frees what rl_driver_new built; the I/O thread must not run. */
static void s_destroy(rl_driver *d)
{
    if (d->sync_init) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
    }
    for (int k = 0; k < d->n_groups; k++)
        free(d->groups[k].ranks);
    free(d->groups);
    free(d->group_of_role);
    for (int i = 0; i < d->n_slots; i++) {
        for (int k = 0; k < d->slots[i].n_retry_safe; k++)
            free(d->slots[i].retry_safe[k]);
        free(d->slots[i].retry_safe);
    }
    free(d->slots);
    rl_drv_relays_free(d);
    rl_net_free_keys(d->authorized, d->n_authorized);
    free(d->config_json);
    free(d->locations_json);
    free(d);
}

/* A fresh job id: workers carry it in HELLO, so an orphan of an earlier
 * driver on the same port is refused (and leaves). */
static int s_make_job_id(rl_driver *d, const char *given)
{
    if (given) { /* a resumed run's: checked, it goes into every HELLO comparison */
        size_t n = strlen(given);
        int ok = n == 16;
        for (size_t i = 0; ok && i < n; i++)
            ok = (given[i] >= '0' && given[i] <= '9') || (given[i] >= 'a' && given[i] <= 'f');
        if (!ok)
            return rl_error_set(RL_EINVAL, "driver: job id '%.40s' is not 16 lowercase hex digits",
                                given);
        memcpy(d->job_id, given, n + 1);
        return RL_OK;
    }
    unsigned char raw[8];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return rl_error_set(RL_EIO, "driver: no random bytes for the job id");
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(d->job_id + 2 * i, 3, "%02x", raw[i]);
    return RL_OK;
}

/* security: the driver's certificate and the workers it admits. */
static int s_load_security(rl_driver *d)
{
    const rl_cluster *cl = d->cl;
    if (!cl->security)
        return RL_OK;
    rl_net_keypair own;
    int rc = rl_net_load_cert(cl->security_driver_cert, 1, &own);
    if (!rc)
        rc = rl_net_load_authorized(cl->security_authorized_keys, &d->authorized,
                                    &d->n_authorized);
    if (!rc)
        rc = rl_net_set_security(&own, (const char *const *)d->authorized, d->n_authorized);
    if (rc)
        return rl_error_wrap(rc, "%s: security", cl->file);
    for (int i = 0; i < d->n_slots; i++)
        if (d->slots[i].node->launch != RL_LAUNCH_EXTERNAL && !cl->security_worker_cert[0])
            return rl_error_set(RL_ECONFIG, "%s: security.worker_cert is needed to start %s "
                                "(launch: %s)", cl->file, d->slots[i].label,
                                rl_launch_mode_name(d->slots[i].node->launch));
    snprintf(d->driver_key, sizeof d->driver_key, "%s", own.public_txt);
    memset(&own, 0, sizeof own);
    return RL_OK;
}

/* 1 when a bound tcp endpoint is reachable from other hosts. */
static int s_public_bind(const char *ep)
{
    if (strncmp(ep, "tcp://", 6) != 0)
        return 0;
    const char *h = ep + 6;
    return !(strncmp(h, "127.", 4) == 0 || strncmp(h, "localhost:", 10) == 0 ||
             strncmp(h, "[::1]", 5) == 0 || strncmp(h, "lo:", 3) == 0);
}

static void s_close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Closes the loop and the sockets (no I/O thread running). */
static void s_close_io(rl_driver *d)
{
    if (d->watch)
        rl_zuv_stop(d->watch);
    d->watch = NULL;
    if (d->loop_init) {
        uv_walk(&d->loop, s_close_walk, NULL);
        uv_run(&d->loop, UV_RUN_DEFAULT);
        uv_loop_close(&d->loop);
    }
    if (d->router)
        zmq_close(d->router);
    if (d->zctx)
        zmq_ctx_term(d->zctx);
}

static int s_loop_init(rl_driver *d)
{
    int rc = uv_loop_init(&d->loop);
    if (rc)
        return rl_error_set(RL_EIO, "driver: uv_loop_init: %s", uv_strerror(rc));
    d->loop_init = 1;
    d->zctx = zmq_ctx_new();
    d->router = d->zctx ? zmq_socket(d->zctx, ZMQ_ROUTER) : NULL;
    if (!d->router)
        return rl_error_set(RL_EIO, "driver: cannot create the ROUTER socket: %s",
                            zmq_strerror(zmq_errno()));
    int linger = 0, mandatory = 0;
    zmq_setsockopt(d->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d->router, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    const char *bind = d->opt.bind_override ? d->opt.bind_override : d->cl->driver_bind_endpoint;
    rl_net_limits(d->router);
    int rc0 = rl_net_curve_server(d->zctx, d->router);
    if (rc0)
        return rl_error_wrap(rc0, "driver");
    if (zmq_bind(d->router, bind) != 0)
        return rl_error_set(RL_EIO, "driver cannot bind %s: %s", bind, zmq_strerror(zmq_errno()));
    if (d->opt.bind_override) {
        size_t len = sizeof d->endpoint;
        zmq_getsockopt(d->router, ZMQ_LAST_ENDPOINT, d->endpoint, &len);
    } else {
        snprintf(d->endpoint, sizeof d->endpoint, "%s", d->cl->driver_endpoint);
    }
    /* Workers it spawns on this machine connect over a Unix socket: a
     * message costs the kernel less than over TCP loopback. Not with
     * security (CurveZMQ is on the TCP sockets); a name taken (a driver of
     * the same job id still running) leaves them on TCP. */
    if (!d->driver_key[0] && d->cl->driver_local_ipc) {
        char local[sizeof d->local_endpoint];
        snprintf(local, sizeof local, "ipc://@rlrt-%s-driver", d->job_id);
        if (zmq_bind(d->router, local) == 0)
            snprintf(d->local_endpoint, sizeof d->local_endpoint, "%s", local);
        else
            rl_log_warn("driver: cannot bind %s (%s): local workers connect over TCP", local,
                        zmq_strerror(zmq_errno()));
    }
    if (!d->driver_key[0] && s_public_bind(bind))
        rl_log_warn("the driver binds %s without security: any host that reaches it can "
                    "join the job (add a security: section to %s for CurveZMQ)", bind,
                    d->cl->file);
    d->watch = rl_zuv_start_locked(&d->loop, d->router, rl_drv_on_readable, d, s_lock_cb,
                                   s_unlock_cb);
    if (!d->watch)
        return rl_error_code();
    for (int i = 0; i < d->n_slots; i++) {
        uv_timer_init(&d->loop, &d->slots[i].restart_timer);
        d->slots[i].restart_timer.data = &d->slots[i];
    }
    rl_drv_relays_init_handles(d);
    if ((rc = uv_timer_init(&d->loop, &d->hb_timer)) ||
        (rc = uv_timer_init(&d->loop, &d->launch_timer)) ||
        (rc = uv_async_init(&d->loop, &d->wake, s_on_wake)) ||
        (rc = uv_signal_init(&d->loop, &d->sigterm)) || (rc = uv_signal_init(&d->loop, &d->sigint)))
        return rl_error_set(RL_EIO, "driver: libuv handles: %s", uv_strerror(rc));
    d->hb_timer.data = d->launch_timer.data = d->wake.data = d->sigterm.data = d->sigint.data = d;
    uv_timer_start(&d->hb_timer, rl_drv_on_heartbeat, (uint64_t)d->interval_ms,
                   (uint64_t)d->interval_ms);
    uv_signal_start(&d->sigterm, s_on_signal, SIGTERM);
    uv_signal_start(&d->sigint, s_on_signal, SIGINT);
    return RL_OK;
}

rl_driver *rl_driver_new(const rl_driver_options *opt)
{
    if (!opt || !opt->cluster) {
        rl_error_set(RL_EINVAL, "rl_driver_new: no cluster");
        return NULL;
    }
    rl_driver *d = rl_zalloc(sizeof *d, "driver");
    if (!d)
        return NULL;
    d->opt = *opt;
    d->cl = opt->cluster;
    if (d->opt.ready_timeout_ms <= 0)
        d->opt.ready_timeout_ms = 30000;
    double ms = d->cl->heartbeat_interval_s * 1000;
    d->interval_ms = ms < 10 ? 10 : ms > 3600000 ? 3600000 : (int)ms;
    d->liveness = d->cl->heartbeat_liveness > 0 ? d->cl->heartbeat_liveness : 3;
    int *started = calloc((size_t)(d->cl->n_roles ? d->cl->n_roles : 1), sizeof *started);
    int rc = started ? s_pick_roles(opt, started) : rl_error_set(RL_ENOMEM, "driver: out of memory");
    if (!rc)
        rc = s_build_slots(d, started);
    free(started);
    if (rc) {
        s_destroy(d);
        return NULL;
    }
    if ((rc = pthread_mutex_init(&d->mu, NULL)) == 0) {
        if ((rc = pthread_cond_init(&d->cv, NULL)) != 0)
            pthread_mutex_destroy(&d->mu);
    }
    if (rc) {
        rl_error_set(RL_EIO, "driver: mutex/condvar: %s", strerror(rc));
        s_destroy(d);
        return NULL;
    }
    d->sync_init = 1;
    d->log_limit.period_s = 10.0;
    d->log_limit.burst = 20;
    if (s_make_job_id(d, opt->job_id) || rl_hs_init() || rl_net_set_max_message(d->cl->max_message_bytes) ||
        s_load_security(d) || rl_drv_relays_build(d)) {
        s_destroy(d);
        return NULL;
    }
    rl_hs_issuer_init(&d->hs); /* HELLO challenges: a key of this run */
    /* CONFIGURE's job tree and its file:line:col, made once for every worker */
    if (d->opt.job) {
        d->config_json = rl_config_to_json(d->opt.job, "");
        d->locations_json = d->config_json ? rl_config_locations_json(d->opt.job) : NULL;
        if (!d->locations_json) {
            rl_error_wrap(rl_error_code(), "driver: the job tree for CONFIGURE");
            s_destroy(d);
            return NULL;
        }
    }
    if (s_loop_init(d)) {
        s_close_io(d);
        s_destroy(d);
        return NULL;
    }
    if (d->cl->http_driver_port &&
        !(d->http = rl_http_start(d->cl->http_bind, d->cl->http_driver_port, s_http, d))) {
        rl_error_wrap(rl_error_code(), "driver: %s http.driver_port", d->cl->file);
        s_close_io(d);
        s_destroy(d);
        return NULL;
    }
    if ((rc = pthread_create(&d->io_thread, NULL, s_io_main, d)) != 0) {
        rl_error_set(RL_EIO, "driver: cannot start the I/O thread: %s", strerror(rc));
        rl_http_stop(d->http);
        s_close_io(d);
        s_destroy(d);
        return NULL;
    }
    d->io_started = 1;
    return d;
}

const char *rl_driver_endpoint(const rl_driver *d) { return d->endpoint; }

const char *rl_driver_job_id(const rl_driver *d) { return d->job_id; }

const char *rl_driver_public_key(const rl_driver *d) { return d->driver_key; }

int rl_driver_interrupted(const rl_driver *d)
{
    rl_drv_lock((rl_driver *)d);
    int v = d->interrupted;
    rl_drv_unlock((rl_driver *)d);
    return v;
}

/* d->fatal is written once, so the pointer stays valid and unchanged. */
const char *rl_driver_fatal(const rl_driver *d)
{
    rl_drv_lock((rl_driver *)d);
    const char *f = d->fatal[0] ? d->fatal : NULL;
    rl_drv_unlock((rl_driver *)d);
    return f;
}

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

/* CPU seconds of process `pid` (0: this process) and its affinity mask;
 * 0 when either cannot be read (the process is gone, or not ours). */
static int s_process_cpu(pid_t pid, double *cpu_s, cpu_set_t *mask)
{
    clockid_t clock = CLOCK_PROCESS_CPUTIME_ID;
    struct timespec ts;
    if ((pid && clock_getcpuclockid(pid, &clock)) || clock_gettime(clock, &ts) ||
        sched_getaffinity(pid, sizeof *mask, mask))
        return 0;
    *cpu_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    return 1;
}

void rl_driver_cpu_usage(const rl_driver *d, rl_driver_cpu *out)
{
    cpu_set_t all, one;
    CPU_ZERO(&all);
    double cpu_s = 0;
    out->complete = s_process_cpu(0, &cpu_s, &all);
    out->cpu_s = cpu_s;
    rl_drv_lock((rl_driver *)d);
    for (int i = 0; i < d->n_slots; i++) {
        const rl_drv_slot *s = &d->slots[i];
        if (s->node->launch != RL_LAUNCH_LOCAL || !s->proc_pid ||
            !s_process_cpu(s->proc_pid, &cpu_s, &one)) {
            out->complete = 0;
            continue;
        }
        out->cpu_s += cpu_s;
        CPU_OR(&all, &all, &one);
    }
    rl_drv_unlock((rl_driver *)d);
    out->cores = CPU_COUNT(&all);
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
    int rc = rl_drv_wait_until(d, s_started, d, -1, 0);
    if (!rc && d->start_error[0])
        rc = rl_error_set(RL_EIO, "%s", d->start_error);
    if (!rc)
        rc = rl_drv_wait_ready(d, NULL, timeout);
    if (!rc)
        d->started = 1;
    rl_drv_unlock(d);
    if (!rc)
        rl_sd_notify("READY=1\nSTATUS=every worker is ready");
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
    return !rl_drv_relays_running(d);
}

int rl_driver_shutdown(rl_driver *d, int timeout_ms)
{
    rl_sd_notify("STOPPING=1");
    rl_drv_lock(d);
    d->shutting_down = 1;
    d->shutdown_requested = 1;
    rl_drv_wake(d);
    /* neither a second signal nor a fatal error may cut the wait short */
    int rc = rl_drv_wait_until(d, s_children_gone, d, timeout_ms, 1);
    if (rc == RL_ETIMEOUT) {
        for (int i = 0; i < d->n_slots; i++)
            if (d->slots[i].proc_running)
                rl_log_warn("%s did not exit in %.1f s: SIGKILL", d->slots[i].label,
                            timeout_ms / 1000.0);
        if (rl_drv_relays_running(d))
            rl_log_warn("%d relay(s) did not exit in %.1f s: SIGKILL", rl_drv_relays_running(d),
                        timeout_ms / 1000.0);
        d->kill_requested = 1;
        rl_drv_wake(d);
        rl_drv_wait_until(d, s_children_gone, d, 2000, 1);
        d->child_failures++;
    }
    for (int i = 0; i < d->n_slots; i++)
        d->slots[i].has_id = 0;
    rc = d->child_failures ? rl_error_set(RL_EPEER, "%d worker(s) did not exit cleanly",
                                          d->child_failures)
                           : RL_OK;
    rl_drv_unlock(d);
    return rc;
}

void rl_driver_free(rl_driver *d)
{
    if (!d)
        return;
    rl_drv_lock(d);
    d->quit = 1;
    rl_drv_unlock(d);
    rl_drv_wake(d);
    if (d->io_started)
        pthread_join(d->io_thread, NULL);
    rl_http_stop(d->http); /* its callback takes d->mu: stopped before d goes */
    d->http = NULL;
    /* the I/O thread is gone: this thread may use the loop now */
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        if (s->proc_running)
            uv_process_kill(&s->proc, SIGKILL);
        if (i == 0)
            rl_drv_relays_signal(d, SIGKILL);
        while (s->calls) {
            rl_drv_subcall *c = s->calls;
            s->calls = c->next;
            rl_drv_subcall_free(c);
        }
    }
    /* let queued SHUTDOWNs reach external workers before the socket goes */
    int linger = 500;
    zmq_setsockopt(d->router, ZMQ_LINGER, &linger, sizeof linger);
    s_close_io(d);
    s_destroy(d);
}
