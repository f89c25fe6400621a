/* dispatch.c — worker groups, the four dispatch modes (chunking and
 * concatenation for dp_compute), futures and the calls queued on slots (see
 * driver_internal.h). */
#include "common/runtime/driver_internal.h"

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/worker.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rl_dispatch_name(rl_dispatch mode)
{
    static const char *names[] = {"one_to_all", "dp_compute", "rank_zero", "all_to_all"};
    return (unsigned)mode < 4 ? names[mode] : "?";
}

/* ---- sub-calls and failures ----------------------------------------------------------- */

void rl_drv_future_fail(rl_future *f, int index, int code, const char *fmt, ...)
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

void rl_drv_subcall_free(rl_drv_subcall *c)
{
    rl_dataproto_free(c->payload);
    free(c);
}

rl_drv_subcall *rl_drv_take_subcall(rl_drv_slot *s, uint64_t call_id)
{
    for (rl_drv_subcall **p = &s->calls; *p; p = &(*p)->next) {
        if ((*p)->call_id == call_id && (*p)->sent) { /* only calls this worker got */
            rl_drv_subcall *c = *p;
            *p = c->next;
            return c;
        }
    }
    return NULL;
}

int rl_drv_retry_safe(const rl_drv_slot *s, const char *method)
{
    for (int i = 0; i < s->n_retry_safe; i++)
        if (strcmp(s->retry_safe[i], method) == 0)
            return 1;
    return 0;
}

/* RL_WORKER_ABORT (call id 0: no reply) to slot t, meta {why}. */
static void s_send_abort(rl_drv_slot *t, const char *why)
{
    rl_dataproto *in = rl_dataproto_new_meta(json_pack("{s:s}", "why", why));
    if (!in) {
        rl_log_warn("%s: cannot make the abort: %s", t->label, rl_error_message());
        return;
    }
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Call call = RL__CALL__INIT;
    call.call_id = 0;
    call.method = RL_WORKER_ABORT;
    call.has_payload = 1;
    env.body_case = RL__ENVELOPE__BODY_CALL;
    env.call = &call;
    if (rl_drv_send(t, &env, in))
        rl_log_warn("%s: the abort was not sent: %s", t->label, rl_error_message());
    rl_dataproto_free(in);
}

/* The worker of slot s was lost with calls that fail: the other ranks of its
 * group abort their waits on peers (a collective with it). Not when its
 * calls are all re-sent (retry-safe methods involve no peer) or it had
 * none: nobody can be waiting for it then. */
static void s_abort_group(rl_drv_slot *s, const char *why)
{
    rl_driver *d = s->d;
    if (!d->started || d->shutting_down || d->fatal[0] || s->state == RL_SLOT_FAILED)
        return;
    const rl_group *g = &d->groups[s->group];
    char reason[400];
    snprintf(reason, sizeof reason, "%s %s", s->label, why);
    for (int r = 0; r < g->size; r++) {
        rl_drv_slot *t = g->ranks[r];
        if (t != s && t->state == RL_SLOT_READY && t->has_id)
            s_send_abort(t, reason);
    }
}

void rl_drv_fail_calls(rl_drv_slot *s, const char *why)
{
    rl_drv_subcall *c = s->calls, *keep = NULL, **tail = &keep;
    rl_driver *d = s->d;
    int failed = 0;
    if (d->started && !d->shutting_down && !d->fatal[0] && s->state != RL_SLOT_FAILED)
        rl_drv_recovery_begin(s, why);
    s->calls = NULL;
    while (c) {
        rl_drv_subcall *next = c->next;
        if (c->sent && c->payload && c->attempts <= d->cl->restart_call_retries &&
            rl_drv_retry_safe(s, c->f->method) && !d->fatal[0]) {
            /* the role declared the method retry-safe: the restarted worker
             * runs it again (a fresh call id, so a late answer of the dead
             * connection can never be taken for it) */
            rl_log_warn("worker %s %s during call '%s': it will be sent again to the restarted "
                        "worker (retry %d of %d; the role declares it retry-safe)",
                        s->label, why, c->f->method, c->attempts, d->cl->restart_call_retries);
            c->sent = 0;
            c->call_id = ++d->next_call_id;
            c->next = NULL;
            *tail = c;
            tail = &c->next;
        } else if (c->sent) {
            s->calls_failed++;
            failed++;
            rl_drv_future_fail(c->f, c->index, RL_EPEER,
                               "worker %s (pid %ld on node %s) %s during call '%s'%s", s->label,
                               s->proc_pid ? (long)s->proc_pid : s->worker_pid, s->node->name,
                               why, c->f->method,
                               rl_drv_retry_safe(s, c->f->method)
                                   ? " (retry-safe, but restart.call_retries is spent)"
                                   : " (not retry-safe: its role does not declare it so)");
            rl_drv_subcall_free(c);
        } else { /* queued: still waits for the restarted worker */
            c->next = NULL;
            *tail = c;
            tail = &c->next;
        }
        c = next;
    }
    s->calls = keep;
    if (failed)
        s_abort_group(s, why);
}

void rl_drv_fail_all_queued(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        while (s->calls) {
            rl_drv_subcall *c = s->calls;
            s->calls = c->next;
            rl_drv_future_fail(c->f, c->index, RL_EPEER, "%s", d->fatal);
            rl_drv_subcall_free(c);
        }
    }
}

/* ---- groups ----------------------------------------------------------------------------- */

rl_group *rl_driver_group(rl_driver *d, const char *role)
{
    int r = rl_cluster_role_index(d->cl, role);
    if (r < 0) {
        char known[1024] = "";
        size_t n = 0;
        for (int k = 0; k < d->cl->n_roles && n + 1 < sizeof known; k++)
            n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", k ? ", " : "",
                                  d->cl->roles[k].name);
        rl_error_set(RL_ENOTFOUND, "role %s is not in %s (roles: %s)", role ? role : "(null)",
                     d->cl->file, n ? known : "none");
        return NULL;
    }
    if (d->group_of_role[r] < 0) {
        rl_error_set(RL_ENOTFOUND, "role %s of %s is not started by this job%s", role, d->cl->file,
                     d->cl->roles[r].count ? " (its recipe does not list it)" : " (it has no ranks)");
        return NULL;
    }
    return &d->groups[d->group_of_role[r]];
}

int rl_driver_group_count(const rl_driver *d) { return d->n_groups; }

rl_group *rl_driver_group_at(rl_driver *d, int i)
{
    if (i < 0 || i >= d->n_groups) {
        rl_error_set(RL_ERANGE, "group %d outside [0, %d)", i, d->n_groups);
        return NULL;
    }
    return &d->groups[i];
}

int rl_group_size(const rl_group *g) { return g->size; }

const char *rl_group_role(const rl_group *g) { return g->name; }

int rl_group_pid(const rl_group *g, int rank)
{
    if (rank < 0 || rank >= g->size)
        return 0;
    rl_drv_lock(g->d);
    int pid = g->ranks[rank]->proc_pid;
    rl_drv_unlock(g->d);
    return pid;
}

const char *rl_group_address(const rl_group *g, int rank)
{
    return (rank >= 0 && rank < g->size) ? g->ranks[rank]->node->address : NULL;
}

const rl_placement *rl_group_placement(const rl_group *g, int rank)
{
    return (rank >= 0 && rank < g->size) ? g->ranks[rank]->pl : NULL;
}

int rl_group_wait_ready(rl_group *g, int timeout_ms)
{
    rl_drv_lock(g->d);
    int rc = rl_drv_wait_ready(g->d, g, timeout_ms);
    rl_drv_unlock(g->d);
    return rc;
}

/* ---- calls ------------------------------------------------------------------------------ */

static rl_future *s_future_new(rl_group *g, const char *method, rl_dispatch mode, int n)
{
    if (!method || !*method) {
        rl_error_set(RL_EINVAL, "call on %s: no method name", g->name);
        return NULL;
    }
    if (strlen(method) >= sizeof ((rl_future *)0)->method) {
        rl_error_set(RL_EINVAL, "call on %s: method name '%.40s...' is too long", g->name, method);
        return NULL;
    }
    rl_future *f = calloc(1, sizeof *f);
    if (f) {
        f->results = calloc((size_t)n, sizeof *f->results);
        f->in_rows = calloc((size_t)n, sizeof *f->in_rows);
    }
    if (!f || !f->results || !f->in_rows) {
        if (f) {
            free(f->results);
            free(f->in_rows);
        }
        free(f);
        rl_error_set(RL_ENOMEM, "call '%s' on %s: out of memory", method, g->name);
        return NULL;
    }
    f->d = g->d;
    f->g = g;
    f->mode = mode;
    snprintf(f->method, sizeof f->method, "%s", method);
    f->n = n;
    f->t_issue = uv_hrtime();
    return f;
}

/* Queues one sub-call on slot s (the I/O thread sends it once s is READY);
 * takes `payload`. Sub-calls of a slot are kept in issue order, which is the
 * order the worker runs them in. */
static void s_issue(rl_future *f, int index, rl_drv_slot *s, rl_dataproto *payload)
{
    rl_driver *d = f->d;
    f->pending++;
    if (s->state == RL_SLOT_FAILED || d->fatal[0]) {
        rl_drv_future_fail(f, index, RL_EPEER, "%s", d->fatal[0] ? d->fatal : "worker given up");
        rl_dataproto_free(payload);
        return;
    }
    rl_drv_subcall *c = calloc(1, sizeof *c);
    if (!c) {
        rl_drv_future_fail(f, index, RL_ENOMEM, "call '%s' to %s: out of memory", f->method,
                           s->label);
        rl_dataproto_free(payload);
        return;
    }
    c->call_id = ++d->next_call_id;
    c->f = f;
    c->index = index;
    c->payload = payload;
    rl_drv_subcall **tail = &s->calls;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
}

void rl_drv_send_slot_queued(rl_drv_slot *s)
{
    if (s->state != RL_SLOT_READY)
        return;
    for (rl_drv_subcall **p = &s->calls; *p;) {
        rl_drv_subcall *c = *p;
        if (c->sent || !rl_drv_send_call(s, c)) {
            p = &c->next;
            continue;
        }
        *p = c->next;
        rl_drv_future_fail(c->f, c->index, rl_error_code(), "sending '%s' to %s: %s",
                           c->f->method, s->label, rl_error_message());
        rl_drv_subcall_free(c);
    }
}

void rl_drv_send_queued(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++)
        rl_drv_send_slot_queued(&d->slots[i]);
}

/* A view of `in` (NULL: an empty batch) that a sub-call can own. */
static rl_dataproto *s_view(const rl_dataproto *in)
{
    if (!in) {
        rl_dataproto *e = rl_dataproto_new();
        if (e)
            rl_dataproto_set_rows(e, 0);
        return e;
    }
    return rl_dataproto_select(in, NULL, 0, NULL, 0);
}

/* Issues parts[0..n) (taken) as the sub-calls of f and sends them to the
 * READY ranks from this thread (under d->mu, in issue order after anything
 * queued before): no hand-off to the I/O thread on the way out. Sub-calls
 * of a rank that is not READY stay queued; the I/O thread sends them when
 * it is (s_on_ready). */
static rl_future *s_issue_all(rl_future *f, rl_dataproto **parts)
{
    rl_group *g = f->g;
    rl_drv_lock(g->d);
    for (int r = 0; r < f->n; r++) {
        f->in_rows[r] = rl_dataproto_rows(parts[r]);
        s_issue(f, r, g->ranks[r], parts[r]);
    }
    rl_drv_send_batch_begin(g->d);
    for (int r = 0; r < f->n; r++)
        rl_drv_send_slot_queued(g->ranks[r]);
    rl_drv_send_batch_end(g->d);
    rl_drv_unlock(g->d);
    free(parts);
    return f;
}

static rl_future *s_fail_parts(rl_future *f, rl_dataproto **parts, int n)
{
    for (int r = 0; parts && r < n; r++)
        rl_dataproto_free(parts[r]);
    free(parts);
    rl_future_free(f);
    return NULL;
}

rl_future *rl_group_call(rl_group *g, const char *method, rl_dispatch mode, const rl_dataproto *in)
{
    if (!g) {
        rl_error_set(RL_EINVAL, "call '%s': no group", method ? method : "");
        return NULL;
    }
    if (mode == RL_DISPATCH_ALL_TO_ALL) {
        rl_error_set(RL_EINVAL, "all_to_all needs one DataProto per rank: use rl_group_call_each");
        return NULL;
    }
    if ((unsigned)mode > RL_DISPATCH_ALL_TO_ALL) {
        rl_error_set(RL_EINVAL, "call '%s' on %s: unknown dispatch mode %d", method ? method : "",
                     g->name, (int)mode);
        return NULL;
    }
    rl_future *f = s_future_new(g, method, mode, mode == RL_DISPATCH_RANK_ZERO ? 1 : g->size);
    if (!f)
        return NULL;
    int n = f->n;
    rl_dataproto **parts = calloc((size_t)n, sizeof *parts);
    if (!parts) {
        rl_error_set(RL_ENOMEM, "call '%s' on %s: out of memory", method, g->name);
        return s_fail_parts(f, NULL, 0);
    }
    if (mode == RL_DISPATCH_DP_COMPUTE) {
        rl_dataproto *src = s_view(in);
        int rc = src ? rl_dataproto_chunk(src, n, 1, parts, &f->pad) : rl_error_code();
        rl_dataproto_free(src);
        if (rc) {
            rl_error_wrap(rc, "dp_compute '%s' on %s", method, g->name);
            free(parts); /* chunk leaves no parts behind on failure */
            rl_future_free(f);
            return NULL;
        }
    } else {
        for (int r = 0; r < n; r++) {
            if (!(parts[r] = s_view(in))) {
                rl_error_wrap(rl_error_code(), "call '%s' on %s", method, g->name);
                return s_fail_parts(f, parts, n);
            }
        }
    }
    return s_issue_all(f, parts);
}

rl_future *rl_group_call_each(rl_group *g, const char *method, rl_dataproto *const *per_rank)
{
    if (!g) {
        rl_error_set(RL_EINVAL, "call '%s': no group", method ? method : "");
        return NULL;
    }
    rl_future *f = s_future_new(g, method, RL_DISPATCH_ALL_TO_ALL, g->size);
    if (!f)
        return NULL;
    rl_dataproto **parts = calloc((size_t)g->size, sizeof *parts);
    if (!parts) {
        rl_error_set(RL_ENOMEM, "call '%s' on %s: out of memory", method, g->name);
        return s_fail_parts(f, NULL, 0);
    }
    for (int r = 0; r < g->size; r++) {
        if (!(parts[r] = s_view(per_rank ? per_rank[r] : NULL))) {
            rl_error_wrap(rl_error_code(), "call '%s' on %s/%d", method, g->name, r);
            return s_fail_parts(f, parts, g->size);
        }
    }
    return s_issue_all(f, parts);
}

/* ---- futures ---------------------------------------------------------------------------- */

/* A future completes when every rank answered or as soon as one failed. */
static int s_future_complete(void *arg)
{
    const rl_future *f = arg;
    return f->pending == 0 || f->failed;
}

int rl_future_done(const rl_future *f)
{
    rl_drv_lock(f->d);
    int done = s_future_complete((void *)f);
    rl_drv_unlock(f->d);
    return done;
}

int rl_future_wait(rl_future *f, int timeout_ms)
{
    rl_driver *d = f->d;
    rl_drv_lock(d);
    int rc = rl_drv_wait_until(d, s_future_complete, f, timeout_ms, 0);
    if (rc == RL_ETIMEOUT)
        rc = rl_error_set(RL_ETIMEOUT, "call '%s' on %s: no answer after %.1f s", f->method,
                          f->g->name, timeout_ms / 1000.0);
    else if (!rc && f->failed)
        rc = rl_error_set(f->code, "%s", f->error);
    rl_drv_unlock(d);
    return rc;
}

typedef struct {
    rl_future *const *fs;
    int n;
} s_futures;

/* Every future completed, or one failed. */
static int s_all_complete(void *arg)
{
    const s_futures *a = arg;
    int all = 1;
    for (int i = 0; i < a->n; i++) {
        if (!a->fs[i])
            continue;
        if (a->fs[i]->failed)
            return 1;
        all &= a->fs[i]->pending == 0;
    }
    return all;
}

int rl_future_wait_all(rl_future *const *fs, int n, int timeout_ms)
{
    rl_driver *d = NULL;
    for (int i = 0; i < n && !d; i++)
        d = fs[i] ? fs[i]->d : NULL;
    if (!d)
        return RL_OK;
    s_futures a = {fs, n};
    rl_drv_lock(d);
    int rc = rl_drv_wait_until(d, s_all_complete, &a, timeout_ms, 0);
    if (rc == RL_ETIMEOUT)
        rc = rl_error_set(RL_ETIMEOUT, "%d calls: not all answered after %.1f s", n,
                          timeout_ms / 1000.0);
    for (int i = 0; i < n && !rc; i++)
        if (fs[i] && fs[i]->failed)
            rc = rl_error_set(fs[i]->code, "%s", fs[i]->error);
    rl_drv_unlock(d);
    return rc;
}

/* The rank that answered sub-call r (rank_zero has one sub-call: rank 0). */
static int s_missing_payload(const rl_future *f, int r)
{
    return rl_error_set(RL_EPROTO, "call '%s' on %s: %s/%d returned no payload", f->method,
                        f->g->name, f->g->name, r);
}

static int s_take_rank(rl_future *f, int rank, rl_dataproto **out)
{
    *out = NULL;
    if (f->pending || f->failed)
        return rl_error_set(RL_ESTATE, "call '%s' on %s is %s", f->method, f->g->name,
                            f->pending ? "not finished" : "failed");
    if (rank < 0 || rank >= f->n)
        return rl_error_set(RL_ERANGE, "call '%s' on %s: rank %d outside [0, %d)", f->method,
                            f->g->name, rank, f->n);
    if (!f->results[rank])
        return s_missing_payload(f, rank);
    *out = f->results[rank];
    f->results[rank] = NULL;
    return RL_OK;
}

int rl_future_take_rank(rl_future *f, int rank, rl_dataproto **out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_future_take_rank: out is NULL");
    rl_drv_lock(f->d);
    int rc = s_take_rank(f, rank, out);
    rl_drv_unlock(f->d);
    return rc;
}

/* Results are complete and no longer touched by the I/O thread once the
 * future is done, so the concatenation runs without the lock. */
int rl_future_take(rl_future *f, rl_dataproto **out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_future_take: out is NULL");
    *out = NULL;
    if (f->mode == RL_DISPATCH_RANK_ZERO)
        return rl_future_take_rank(f, 0, out);
    if (f->mode != RL_DISPATCH_DP_COMPUTE)
        return rl_error_set(RL_EINVAL, "%s call '%s' has one result per rank: use rl_future_take_rank",
                            rl_dispatch_name(f->mode), f->method);
    rl_drv_lock(f->d);
    int pending = f->pending, failed = f->failed;
    rl_drv_unlock(f->d);
    if (pending || failed)
        return rl_error_set(RL_ESTATE, "call '%s' on %s is %s", f->method, f->g->name,
                            pending ? "not finished" : "failed");
    int64_t rows = 0;
    for (int r = 0; r < f->n; r++) {
        if (!f->results[r])
            return s_missing_payload(f, r);
        if (f->pad && rl_dataproto_rows(f->results[r]) != f->in_rows[r])
            return rl_error_set(RL_ESHAPE,
                                "dp_compute '%s': %s/%d returned %lld rows for %lld input rows; "
                                "cannot strip %lld padding rows",
                                f->method, f->g->name, r,
                                (long long)rl_dataproto_rows(f->results[r]),
                                (long long)f->in_rows[r], (long long)f->pad);
        int64_t sum;
        if (__builtin_add_overflow(rows, rl_dataproto_rows(f->results[r]), &sum))
            return rl_error_set(RL_ERANGE, "dp_compute '%s': %s/%d returned %lld rows; added to "
                                "the %lld rows of the replies before it they overflow int64",
                                f->method, f->g->name, r,
                                (long long)rl_dataproto_rows(f->results[r]), (long long)rows);
        rows = sum;
    }
    if (rows < f->pad)
        return rl_error_set(RL_ESHAPE, "dp_compute '%s': %lld rows back, fewer than the %lld "
                            "padding rows", f->method, (long long)rows, (long long)f->pad);
    rl_dataproto *cat = rl_dataproto_concat(f->results, f->n);
    if (!cat)
        return rl_error_wrap(rl_error_code(), "dp_compute '%s': concat of replies", f->method);
    if (f->pad) {
        rl_dataproto *stripped = rl_dataproto_slice(cat, 0, rows - f->pad);
        rl_dataproto_free(cat);
        if (!stripped)
            return rl_error_wrap(rl_error_code(), "dp_compute '%s': stripping the padding",
                                 f->method);
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
    rl_drv_lock(f->d);
    for (int i = 0; i < f->d->n_slots; i++) {
        rl_drv_slot *s = &f->d->slots[i];
        for (rl_drv_subcall **p = &s->calls; *p;) {
            if ((*p)->f == f) {
                rl_drv_subcall *c = *p;
                *p = c->next;
                rl_drv_subcall_free(c);
            } else {
                p = &(*p)->next;
            }
        }
    }
    rl_drv_unlock(f->d);
    for (int r = 0; r < f->n; r++)
        rl_dataproto_free(f->results[r]);
    free(f->results);
    free(f->in_rows);
    free(f);
}

int rl_group_abort(rl_group *g, const char *why, int timeout_ms)
{
    rl_dataproto *in = rl_dataproto_new_meta(json_pack("{s:s}", "why", why ? why : "the recipe"));
    rl_future *f = in ? rl_group_call(g, RL_WORKER_ABORT, RL_DISPATCH_ONE_TO_ALL, in) : NULL;
    int rc = f ? rl_future_wait(f, timeout_ms) : rl_error_code();
    rl_future_free(f);
    rl_dataproto_free(in);
    return rc;
}

int rl_group_drain(rl_group *g, int timeout_ms)
{
    rl_future *f = rl_group_call(g, RL_WORKER_DRAIN, RL_DISPATCH_ONE_TO_ALL, NULL);
    if (!f)
        return rl_error_code();
    int rc = rl_future_wait(f, timeout_ms);
    rl_future_free(f);
    return rc;
}

int rl_group_call_sync(rl_group *g, const char *method, rl_dispatch mode, const rl_dataproto *in,
                       rl_dataproto **out)
{
    if (out)
        *out = NULL;
    rl_future *f = rl_group_call(g, method, mode, in);
    if (!f)
        return rl_error_code();
    int rc = rl_future_wait(f, -1);
    if (!rc && out)
        rc = rl_future_take(f, out);
    rl_future_free(f);
    return rc;
}
