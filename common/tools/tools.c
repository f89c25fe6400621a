/* tools.c — the tool interface's runner, the calculator and the call parser
 * (see common/tools/tools.h). Each call runs on its own detached thread; the caller
 * waits with a deadline. A job is shared by the caller and the thread
 * (refcount), so an abandoned call frees itself when it finally ends. */
#include "common/tools/tools.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlrt/error.h"

const char *rl_tool_outcome_name(rl_tool_outcome o)
{
    static const char *const n[] = {"ok", "error", "garbage", "timeout", "unknown"};
    return (unsigned)o < RL_TOOL_NOUTCOMES ? n[o] : "?";
}

/* ---- calculator ------------------------------------------------------------------ */

typedef struct s_calc {
    const char *s, *p;
    int depth;
} s_calc;

static void s_ws(s_calc *c)
{
    while (*c->p == ' ')
        c->p++;
}

static int s_expr(s_calc *c, int64_t *v);

static int s_atom(s_calc *c, int64_t *v)
{
    s_ws(c);
    if (*c->p == '(') {
        if (++c->depth > 16)
            return rl_error_set(RL_EINVAL, "calc: nesting deeper than 16 at %d", (int)(c->p - c->s));
        c->p++;
        int rc = s_expr(c, v);
        if (rc)
            return rc;
        s_ws(c);
        if (*c->p != ')')
            return rl_error_set(RL_EINVAL, "calc: expected ')' at %d", (int)(c->p - c->s));
        c->p++;
        c->depth--;
        return RL_OK;
    }
    int neg = 0;
    if (*c->p == '-') {
        neg = 1;
        c->p++;
    }
    if (!isdigit((unsigned char)*c->p))
        return rl_error_set(RL_EINVAL, "calc: expected a number at %d", (int)(c->p - c->s));
    int64_t x = 0;
    while (isdigit((unsigned char)*c->p)) {
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, *c->p - '0', &x))
            return rl_error_set(RL_ERANGE, "calc: number too large at %d", (int)(c->p - c->s));
        c->p++;
    }
    *v = neg ? -x : x;
    return RL_OK;
}

/* A left-associative chain of operands: level 1, terms joined by + and -;
 * level 0, atoms joined by *. */
static int s_chain(s_calc *c, int level, int64_t *v)
{
    int rc = level ? s_chain(c, level - 1, v) : s_atom(c, v);
    for (;;) {
        if (rc)
            return rc;
        s_ws(c);
        char op = *c->p;
        if (level ? op != '+' && op != '-' : op != '*')
            return RL_OK;
        c->p++;
        int64_t w;
        if ((rc = level ? s_chain(c, level - 1, &w) : s_atom(c, &w)))
            return rc;
        if (op == '+'   ? __builtin_add_overflow(*v, w, v)
            : op == '-' ? __builtin_sub_overflow(*v, w, v)
                        : __builtin_mul_overflow(*v, w, v))
            return rl_error_set(RL_ERANGE, "calc: overflow at %d", (int)(c->p - c->s));
    }
}

static int s_expr(s_calc *c, int64_t *v) { return s_chain(c, 1, v); }

int rl_calc_eval(const char *expr, int64_t *value)
{
    if (!expr || !value)
        return rl_error_set(RL_EINVAL, "calc: NULL argument");
    if (strlen(expr) > 64)
        return rl_error_set(RL_EINVAL, "calc: expression longer than 64 characters");
    s_calc c = {expr, expr, 0};
    int rc = s_expr(&c, value);
    if (rc)
        return rc;
    s_ws(&c);
    if (*c.p)
        return rl_error_set(RL_EINVAL, "calc: unexpected '%c' at %d", *c.p, (int)(c.p - c.s));
    return RL_OK;
}

static int s_calc_call(void *state, const char *args, char *out, size_t cap)
{
    (void)state;
    int64_t v;
    int rc = rl_calc_eval(args, &v);
    if (rc)
        return rc;
    snprintf(out, cap, "%lld", (long long)v);
    return RL_OK;
}

rl_tool rl_tool_calculator(void)
{
    rl_tool t = {"calc", s_calc_call, NULL};
    return t;
}

/* The built-in tools by name: add a row to add one. */
static const struct { const char *name; rl_tool (*make)(void); } s_builtin[] = {
    {"calc", rl_tool_calculator},
};

int rl_tool_builtin(const char *name, rl_tool *out)
{
    size_t n = sizeof s_builtin / sizeof s_builtin[0];
    for (size_t i = 0; name && out && i < n; i++)
        if (strcmp(name, s_builtin[i].name) == 0) {
            *out = s_builtin[i].make();
            return RL_OK;
        }
    char known[256] = "";
    size_t at = 0;
    for (size_t i = 0; i < n && at < sizeof known; i++)
        at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", i ? ", " : "",
                               s_builtin[i].name);
    return rl_error_set(RL_ENOTFOUND, "unknown tool '%s' (built-in tools: %s)",
                        name ? name : "(null)", known);
}

/* ---- call parser ------------------------------------------------------------------- */

static int s_name_ok(const char *n)
{
    if (!(n[0] >= 'a' && n[0] <= 'z'))
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

int rl_tool_parse_call(const char *text, size_t len, char name[RL_TOOL_MAX_NAME],
                       char args[RL_TOOL_MAX_ARGS])
{
    if (!text || !name || !args)
        return rl_error_set(RL_EINVAL, "tool call: NULL argument");
    size_t i = 0;
    while (i < len && text[i] == ' ')
        i++;
    size_t n0 = i;
    while (i < len && text[i] != ' ')
        i++;
    size_t nl = i - n0;
    if (nl == 0 || nl >= RL_TOOL_MAX_NAME)
        return rl_error_set(RL_EINVAL, "tool call: the name must be 1..%d characters, got %zu",
                            RL_TOOL_MAX_NAME - 1, nl);
    memcpy(name, text + n0, nl);
    name[nl] = '\0';
    if (!s_name_ok(name))
        return rl_error_set(RL_EINVAL, "tool call: bad tool name '%s'", name);
    while (i < len && text[i] == ' ')
        i++;
    size_t e = len;
    while (e > i && text[e - 1] == ' ')
        e--;
    if (e - i >= RL_TOOL_MAX_ARGS)
        return rl_error_set(RL_EINVAL, "tool call: arguments longer than %d characters",
                            RL_TOOL_MAX_ARGS - 1);
    memcpy(args, text + i, e - i);
    args[e - i] = '\0';
    if (memchr(args, '\0', e - i))
        return rl_error_set(RL_EINVAL, "tool call: NUL byte in the arguments");
    return RL_OK;
}

/* ---- runner ------------------------------------------------------------------------- */

typedef struct s_shared {
    atomic_int refs;
    atomic_int stuck; /* abandoned calls still running */
} s_shared;

static void s_shared_drop(s_shared *s)
{
    if (atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

typedef struct s_job {
    atomic_int refs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, abandoned, rc;
    rl_tool tool;
    s_shared *shared;
    char args[RL_TOOL_MAX_ARGS];
    char err[200];
    size_t cap;
    char out[]; /* cap bytes */
} s_job;

static void s_job_drop(s_job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    s_shared_drop(j->shared);
    free(j);
}

static void *s_job_run(void *arg)
{
    s_job *j = arg;
    j->out[0] = '\0';
    int rc = j->tool.call(j->tool.state, j->args, j->out, j->cap);
    j->out[j->cap - 1] = '\0';
    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    if (rc)
        snprintf(j->err, sizeof j->err, "%s", rl_error_message());
    j->done = 1;
    if (j->abandoned)
        atomic_fetch_sub(&j->shared->stuck, 1);
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    s_job_drop(j);
    return NULL;
}

struct rl_tool_runner {
    rl_tool *tools;
    int n, timeout_ms, max_stuck;
    size_t max_output;
    char *charset;
    s_shared *shared;
};

rl_tool_runner *rl_tool_runner_new(const rl_tool *tools, int n, int timeout_ms,
                                   size_t max_output, int max_stuck, const char *charset)
{
    if (!tools || n < 1 || timeout_ms < 1 || max_output < 1 || max_stuck < 1) {
        rl_error_set(RL_EINVAL, "tool runner: need tools, n >= 1, timeout_ms >= 1, max_output "
                                ">= 1, max_stuck >= 1");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!tools[i].name || !tools[i].call || strlen(tools[i].name) >= RL_TOOL_MAX_NAME ||
            !s_name_ok(tools[i].name)) {
            rl_error_set(RL_EINVAL, "tool runner: tool %d needs a name [a-z][a-z0-9_]* of at "
                                    "most %d characters and a call", i, RL_TOOL_MAX_NAME - 1);
            return NULL;
        }
        for (int k = 0; k < i; k++)
            if (strcmp(tools[k].name, tools[i].name) == 0) {
                rl_error_set(RL_EINVAL, "tool runner: two tools named '%s'", tools[i].name);
                return NULL;
            }
    }
    rl_tool_runner *r = calloc(1, sizeof *r);
    if (r) {
        r->tools = malloc(sizeof *r->tools * (size_t)n);
        r->shared = calloc(1, sizeof *r->shared);
        r->charset = charset ? strdup(charset) : NULL;
    }
    if (!r || !r->tools || !r->shared || (charset && !r->charset)) {
        if (r) {
            free(r->tools);
            free(r->shared);
            free(r->charset);
        }
        free(r);
        rl_error_set(RL_ENOMEM, "tool runner: out of memory");
        return NULL;
    }
    memcpy(r->tools, tools, sizeof *r->tools * (size_t)n);
    atomic_init(&r->shared->refs, 1);
    atomic_init(&r->shared->stuck, 0);
    r->n = n;
    r->timeout_ms = timeout_ms;
    r->max_output = max_output;
    r->max_stuck = max_stuck;
    return r;
}

void rl_tool_runner_free(rl_tool_runner *r)
{
    if (!r)
        return;
    s_shared_drop(r->shared);
    free(r->tools);
    free(r->charset);
    free(r);
}

int rl_tool_runner_stuck(const rl_tool_runner *r)
{
    return r ? atomic_load(&r->shared->stuck) : 0;
}

static void s_put(char *out, size_t cap, rl_tool_outcome *oc, rl_tool_outcome o, const char *fmt,
                  const char *arg)
{
    *oc = o;
    snprintf(out, cap, fmt, arg);
}

int rl_tool_runner_call(rl_tool_runner *r, const char *name, const char *args, char *out,
                        size_t cap, rl_tool_outcome *outcome)
{
    if (!r || !name || !args || !out || cap < 32 || !outcome)
        return rl_error_set(RL_EINVAL, "tool runner call: bad argument (out needs >= 32 bytes)");
    const rl_tool *t = NULL;
    for (int i = 0; i < r->n && !t; i++)
        if (strcmp(r->tools[i].name, name) == 0)
            t = &r->tools[i];
    if (!t) {
        char nm[RL_TOOL_MAX_NAME];
        snprintf(nm, sizeof nm, "%s", name);
        s_put(out, cap, outcome, RL_TOOL_UNKNOWN, "error: unknown tool %s", nm);
        return RL_OK;
    }
    if (strlen(args) >= RL_TOOL_MAX_ARGS) {
        s_put(out, cap, outcome, RL_TOOL_ERROR, "error: %s", "arguments too long");
        return RL_OK;
    }
    if (atomic_load(&r->shared->stuck) >= r->max_stuck) {
        s_put(out, cap, outcome, RL_TOOL_TIMEOUT, "error: %s", "timeout");
        return RL_OK;
    }
    size_t jcap = r->max_output + 2; /* room to see that the output is too long */
    s_job *j = calloc(1, sizeof *j + jcap);
    if (!j)
        return rl_error_set(RL_ENOMEM, "tool runner: out of memory");
    atomic_init(&j->refs, 2);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->tool = *t;
    j->cap = jcap;
    j->shared = r->shared;
    atomic_fetch_add(&r->shared->refs, 1);
    snprintf(j->args, sizeof j->args, "%s", args);
    pthread_attr_t at;
    pthread_t th;
    int started = pthread_attr_init(&at) == 0;
    if (started)
        started = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&th, &at, s_job_run, j) == 0;
    pthread_attr_destroy(&at);
    if (!started) { /* e.g. EAGAIN at the thread limit: this call's outcome */
        atomic_fetch_sub(&j->refs, 1); /* the thread's reference */
        s_job_drop(j);
        s_put(out, cap, outcome, RL_TOOL_ERROR, "error: %s", "cannot start a thread");
        return RL_OK;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += r->timeout_ms / 1000;
    dl.tv_nsec += (long)(r->timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &dl) == ETIMEDOUT && !j->done)
            break;
    if (!j->done) {
        j->abandoned = 1;
        atomic_fetch_add(&r->shared->stuck, 1);
        pthread_mutex_unlock(&j->mu);
        s_job_drop(j);
        s_put(out, cap, outcome, RL_TOOL_TIMEOUT, "error: %s", "timeout");
        return RL_OK;
    }
    pthread_mutex_unlock(&j->mu);
    if (j->rc) {
        s_put(out, cap, outcome, RL_TOOL_ERROR, "error: %s", j->err);
    } else {
        size_t len = strlen(j->out);
        int bad = len > r->max_output || len >= cap || len == 0; /* never cut */
        for (size_t i = 0; i < len && !bad; i++) {
            unsigned char ch = (unsigned char)j->out[i];
            bad = ch < 0x20 || ch > 0x7e || (r->charset && !strchr(r->charset, ch));
        }
        if (bad)
            s_put(out, cap, outcome, RL_TOOL_GARBAGE, "error: %s", "bad output");
        else
            s_put(out, cap, outcome, RL_TOOL_OK, "%s", j->out);
    }
    s_job_drop(j);
    return RL_OK;
}
