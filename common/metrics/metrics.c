/* metrics.c — metric sets, the metrics.jsonl + TensorBoard sink and the
 * console line. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "rlrt/error.h"
#include "common/metrics/metrics.h"
#include "common/core/util.h"

/* tfevents.c; not part of the public API */
int rl__tb_truncate_file(const char *path, int64_t keep_step)
    __attribute__((visibility("hidden")));

/* ---- metric sets ------------------------------------------------------------- */

struct rl_metric_set {
    char **names;
    double *values;
    int n, cap;
};

rl_metric_set *rl_metric_set_new(void)
{
    return rl_zalloc(sizeof(rl_metric_set), "rl_metric_set_new");
}

void rl_metric_set_clear(rl_metric_set *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        free(s->names[i]);
    s->n = 0;
}

void rl_metric_set_free(rl_metric_set *s)
{
    if (!s)
        return;
    rl_metric_set_clear(s);
    free(s->names);
    free(s->values);
    free(s);
}

static int s_find(const rl_metric_set *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return i;
    return -1;
}

int rl_metric_set_put(rl_metric_set *s, const char *name, double value)
{
    if (!s || !name || !*name || strcmp(name, "step") == 0)
        return rl_error_set(RL_EINVAL, "rl_metric_set_put: bad metric name '%s' (empty or "
                                       "reserved 'step')", name ? name : "(null)");
    int i = s_find(s, name);
    if (i >= 0) {
        s->values[i] = value;
        return RL_OK;
    }
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 16;
        char **nn = realloc(s->names, (size_t)nc * sizeof *nn);
        if (!nn)
            return rl_error_set(RL_ENOMEM, "rl_metric_set_put: out of memory");
        s->names = nn;
        double *nv = realloc(s->values, (size_t)nc * sizeof *nv);
        if (!nv)
            return rl_error_set(RL_ENOMEM, "rl_metric_set_put: out of memory");
        s->values = nv;
        s->cap = nc;
    }
    if (!(s->names[s->n] = strdup(name)))
        return rl_error_set(RL_ENOMEM, "rl_metric_set_put: out of memory");
    s->values[s->n++] = value;
    return RL_OK;
}

int rl_metric_set_get(const rl_metric_set *s, const char *name, double *value)
{
    int i = s && name ? s_find(s, name) : -1;
    if (i < 0)
        return RL_ENOTFOUND;
    if (value)
        *value = s->values[i];
    return RL_OK;
}

int rl_metric_set_put_stats(rl_metric_set *s, const char *prefix, const double *v, int64_t n)
{
    if (!s || !prefix || n < 0 || (n > 0 && !v))
        return rl_error_set(RL_EINVAL, "rl_metric_set_put_stats: NULL argument or n %" PRId64
                                       " < 0", n);
    if (n == 0)
        return RL_OK;
    double sum = 0.0, mx = v[0], mn = v[0];
    for (int64_t i = 0; i < n; i++) {
        sum += v[i];
        mx = v[i] > mx ? v[i] : mx;
        mn = v[i] < mn ? v[i] : mn;
    }
    size_t cap = strlen(prefix) + 8;
    char *key = malloc(cap);
    if (!key)
        return rl_error_set(RL_ENOMEM, "rl_metric_set_put_stats: out of memory");
    int rc;
    snprintf(key, cap, "%s/mean", prefix);
    rc = rl_metric_set_put(s, key, sum / (double)n);
    snprintf(key, cap, "%s/max", prefix);
    if (!rc)
        rc = rl_metric_set_put(s, key, mx);
    snprintf(key, cap, "%s/min", prefix);
    if (!rc)
        rc = rl_metric_set_put(s, key, mn);
    free(key);
    return rc;
}

int rl_metric_set_count(const rl_metric_set *s) { return s ? s->n : 0; }

const char *rl_metric_set_name(const rl_metric_set *s, int i)
{
    return s && i >= 0 && i < s->n ? s->names[i] : NULL;
}

double rl_metric_set_value(const rl_metric_set *s, int i)
{
    return s && i >= 0 && i < s->n ? s->values[i] : NAN;
}

/* ---- console line ------------------------------------------------------------- */

typedef struct s_buf {
    char *p;
    size_t cap, len;
} s_buf;

static void s_add(s_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_add(s_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int k = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0)
        b->len += (size_t)k;
}

static int s_first(const rl_metric_set *s, double *v, const char *a, const char *b,
                   const char *c)
{
    return rl_metric_set_get(s, a, v) == RL_OK || (b && rl_metric_set_get(s, b, v) == RL_OK) ||
           (c && rl_metric_set_get(s, c, v) == RL_OK);
}

int rl_metrics_format_console(const rl_metric_set *s, int64_t step, char *buf, size_t cap)
{
    s_buf b = {buf, cap, 0};
    if (buf && cap)
        buf[0] = '\0';
    double v;
    s_add(&b, "step %" PRId64, step);
    if (s_first(s, &v, RL_M_SCORE_MEAN, RL_M_REWARD_MEAN, NULL))
        s_add(&b, " | reward %.4g", v);
    if (s_first(s, &v, RL_M_ACCURACY, RL_M_VAL_ACCURACY, NULL))
        s_add(&b, " | acc %.3f", v);
    if (s_first(s, &v, RL_M_RESPONSE_LEN, NULL, NULL))
        s_add(&b, " | len %.1f", v);
    if (s_first(s, &v, RL_M_KL_LOSS, RL_M_KL_PENALTY, RL_M_PPO_KL))
        s_add(&b, " | kl %.3g", v);
    if (s_first(s, &v, RL_M_ENTROPY, NULL, NULL))
        s_add(&b, " | ent %.3g", v);
    size_t plen = strlen(RL_M_TIMING_PREFIX);
    int phases = 0;
    for (int i = 0; i < rl_metric_set_count(s); i++) {
        const char *name = rl_metric_set_name(s, i);
        if (strncmp(name, RL_M_TIMING_PREFIX, plen) != 0 || !name[plen])
            continue;
        s_add(&b, "%s%s %.2fs", phases ? " " : " | ", name + plen, rl_metric_set_value(s, i));
        phases++;
    }
    if (s_first(s, &v, RL_M_THROUGHPUT, NULL, NULL))
        s_add(&b, " | %.3g tok/s", v);
    /* validation, when measured this step (training accuracy is "acc") */
    double tr;
    if (rl_metric_set_get(s, RL_M_ACCURACY, &tr) == RL_OK &&
        rl_metric_set_get(s, RL_M_VAL_ACCURACY, &v) == RL_OK)
        s_add(&b, " | val acc %.3f", v);
    return (int)b.len;
}

/* ---- the sink -------------------------------------------------------------------- */

struct rl_metrics {
    char *dir;
    char *jsonl_path;
    FILE *jsonl;
    rl_tb_writer *tb;
    char *tb_path;
    int64_t last_step; /* INT64_MIN: none */
    int64_t resume_step;
};

static char *s_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* Keeps the lines of metrics.jsonl whose "step" is <= keep_step; drops lines
 * that do not parse (a torn last line after a crash). */
static int s_keep_steps(FILE *in, FILE *out, const char *tmp, void *ctx)
{
    int64_t keep_step = *(const int64_t *)ctx;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = RL_OK;
    while ((len = getline(&line, &cap, in)) >= 0) {
        if (len == 0 || line[len - 1] != '\n')
            continue; /* torn tail */
        json_t *o = json_loadb(line, (size_t)len, 0, NULL);
        json_t *st = o ? json_object_get(o, "step") : NULL;
        int keep = st && json_is_integer(st) && json_integer_value(st) <= keep_step;
        json_decref(o);
        if (keep && fwrite(line, 1, (size_t)len, out) != (size_t)len) {
            rc = rl_error_set(RL_EIO, "%s: write failed: %s", tmp, strerror(errno));
            break;
        }
    }
    free(line);
    return rc;
}

static int s_truncate_jsonl(const char *path, int64_t keep_step)
{
    return rl_file_rewrite(path, 1, s_keep_steps, &keep_step);
}

static int s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Truncates every existing event file in tbdir (sorted, for determinism). */
static int s_truncate_tb_dir(const char *tbdir, int64_t keep_step)
{
    DIR *d = opendir(tbdir);
    if (!d)
        return errno == ENOENT ? RL_OK
                               : rl_error_set(RL_EIO, "%s: cannot open: %s", tbdir,
                                              strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0, rc = RL_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        size_t l = strlen(nm);
        if (strncmp(nm, "events.out.tfevents.", 20) != 0 ||
            (l > 8 && strcmp(nm + l - 8, ".rewrite") == 0))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) {
                rc = rl_error_set(RL_ENOMEM, "%s: out of memory", tbdir);
                break;
            }
            names = nn;
        }
        if (!(names[n] = s_join(tbdir, nm))) {
            rc = rl_error_set(RL_ENOMEM, "%s: out of memory", tbdir);
            break;
        }
        n++;
    }
    closedir(d);
    if (names)
        qsort(names, (size_t)n, sizeof *names, s_cmp_str);
    for (int i = 0; i < n && rc == RL_OK; i++)
        rc = rl__tb_truncate_file(names[i], keep_step);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static double s_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* Creates events.out.tfevents.<time>.<host>, adding .1, .2, ... if a file
 * of that name exists (two sinks opened in the same second). */
static int s_open_tb(rl_metrics *m, const char *tbdir)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    double now = s_now();
    size_t cap = strlen(tbdir) + strlen(host) + 64;
    char *path = malloc(cap);
    if (!path)
        return rl_error_set(RL_ENOMEM, "tensorboard: out of memory");
    for (int k = 0;; k++) {
        if (k == 0)
            snprintf(path, cap, "%s/events.out.tfevents.%lld.%s", tbdir, (long long)now,
                     host);
        else
            snprintf(path, cap, "%s/events.out.tfevents.%lld.%s.%d", tbdir,
                     (long long)now, host, k);
        if (access(path, F_OK) != 0)
            break;
    }
    m->tb = rl_tb_writer_open(path, now);
    if (!m->tb) {
        free(path);
        return rl_error_code() ? rl_error_code() : RL_EIO;
    }
    m->tb_path = path;
    return RL_OK;
}

rl_metrics *rl_metrics_open(const char *output_dir, int64_t resume_step, int flags)
{
    if (!output_dir || !*output_dir) {
        rl_error_set(RL_EINVAL, "rl_metrics_open: output_dir is empty");
        return NULL;
    }
    if (flags == 0)
        flags = RL_METRICS_ALL;
    if (resume_step < -1)
        resume_step = -1;
    rl_metrics *m = calloc(1, sizeof *m);
    char *tbdir = NULL;
    int rc = RL_OK;
    if (!m || !(m->dir = strdup(output_dir)) ||
        !(m->jsonl_path = s_join(output_dir, "metrics.jsonl")) ||
        !(tbdir = s_join(output_dir, "tensorboard"))) {
        rc = rl_error_set(RL_ENOMEM, "rl_metrics_open: out of memory");
        goto done;
    }
    m->last_step = resume_step;
    m->resume_step = resume_step;
    if ((rc = rl_mkdir_p(output_dir)))
        goto done;
    if (flags & RL_METRICS_JSONL) {
        if ((rc = s_truncate_jsonl(m->jsonl_path, resume_step)))
            goto done;
        m->jsonl = fopen(m->jsonl_path, "a");
        if (!m->jsonl) {
            rc = rl_error_set(RL_EIO, "%s: cannot open for append: %s", m->jsonl_path,
                              strerror(errno));
            goto done;
        }
    }
    if (flags & RL_METRICS_TENSORBOARD) {
        if ((rc = rl_mkdir_p(tbdir)) || (rc = s_truncate_tb_dir(tbdir, resume_step)) ||
            (rc = s_open_tb(m, tbdir)))
            goto done;
    }
done:
    free(tbdir);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        if (m) {
            if (m->jsonl)
                fclose(m->jsonl);
            rl_tb_writer_close(m->tb);
            free(m->dir);
            free(m->jsonl_path);
            free(m->tb_path);
            free(m);
        }
        rl_error_set(rc, "%s", msg);
        return NULL;
    }
    return m;
}

const char *rl_metrics_event_path(const rl_metrics *m) { return m ? m->tb_path : NULL; }

/* Shortest decimal that reads back as the same double. */
static void s_fmt_double(char *out, size_t cap, double v)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(out, cap, "%.*g", p, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

int rl_metrics_log(rl_metrics *m, int64_t step, const rl_metric_set *s)
{
    return rl_metrics_log_at(m, step, s_now(), s);
}

int rl_metrics_log_at(rl_metrics *m, int64_t step, double wall_time, const rl_metric_set *s)
{
    if (!m)
        return rl_error_set(RL_EINVAL, "rl_metrics_log: sink is NULL");
    if (step < m->last_step || step <= m->resume_step)
        return rl_error_set(RL_EINVAL, "rl_metrics_log: step %" PRId64 " after step %" PRId64
                                       " (steps must not decrease%s)", step, m->last_step,
                            step <= m->resume_step ? " and must exceed the resume step" : "");
    int n = rl_metric_set_count(s);
    if (m->jsonl) {
        if (fprintf(m->jsonl, "{\"step\": %" PRId64, step) < 0)
            return rl_error_set(RL_EIO, "%s: write failed: %s", m->jsonl_path,
                                strerror(errno));
        for (int i = 0; i < n; i++) {
            json_t *k = json_string(rl_metric_set_name(s, i));
            char *ks = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
            json_decref(k);
            if (!ks)
                return rl_error_set(RL_EINVAL, "rl_metrics_log: metric name %d is not valid "
                                               "UTF-8", i);
            double v = rl_metric_set_value(s, i);
            char num[40];
            if (isfinite(v))
                s_fmt_double(num, sizeof num, v);
            else
                snprintf(num, sizeof num, "null");
            int w = fprintf(m->jsonl, ", %s: %s", ks, num);
            free(ks);
            if (w < 0)
                return rl_error_set(RL_EIO, "%s: write failed: %s", m->jsonl_path,
                                    strerror(errno));
        }
        if (fputs("}\n", m->jsonl) < 0 || fflush(m->jsonl) != 0)
            return rl_error_set(RL_EIO, "%s: write failed: %s", m->jsonl_path,
                                strerror(errno));
    }
    if (m->tb) {
        const char **tags = malloc((size_t)(n ? n : 1) * sizeof *tags);
        double *vals = malloc((size_t)(n ? n : 1) * sizeof *vals);
        int rc = RL_OK;
        if (!tags || !vals)
            rc = rl_error_set(RL_ENOMEM, "rl_metrics_log: out of memory");
        for (int i = 0; i < n && rc == RL_OK; i++) {
            tags[i] = rl_metric_set_name(s, i);
            vals[i] = rl_metric_set_value(s, i);
        }
        if (rc == RL_OK)
            rc = rl_tb_writer_scalars(m->tb, step, wall_time, tags, vals, n);
        if (rc == RL_OK)
            rc = rl_tb_writer_flush(m->tb);
        free(tags);
        free(vals);
        if (rc)
            return rc;
    }
    m->last_step = step;
    return RL_OK;
}

int rl_metrics_flush(rl_metrics *m)
{
    if (!m)
        return rl_error_set(RL_EINVAL, "rl_metrics_flush: sink is NULL");
    if (m->jsonl && fflush(m->jsonl) != 0)
        return rl_error_set(RL_EIO, "%s: flush failed: %s", m->jsonl_path, strerror(errno));
    return m->tb ? rl_tb_writer_flush(m->tb) : RL_OK;
}

int rl_metrics_close(rl_metrics *m)
{
    if (!m)
        return RL_OK;
    int rc = RL_OK;
    if (m->jsonl) {
        if (fflush(m->jsonl) != 0 || fsync(fileno(m->jsonl)) != 0)
            rc = rl_error_set(RL_EIO, "%s: flush/fsync failed: %s", m->jsonl_path,
                              strerror(errno));
        if (fclose(m->jsonl) != 0 && rc == RL_OK)
            rc = rl_error_set(RL_EIO, "%s: close failed: %s", m->jsonl_path, strerror(errno));
    }
    int r2 = rl_tb_writer_close(m->tb);
    if (rc == RL_OK)
        rc = r2;
    free(m->dir);
    free(m->jsonl_path);
    free(m->tb_path);
    free(m);
    return rc;
}
