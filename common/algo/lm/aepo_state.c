/* aepo_state.c — AEPO state across steps: threshold τ (EMA), difficulty
 * bucket per global_id, per-bucket targets, α_d and λ_d, bootstrap, and
 * JSON save/restore. See common/algo/lm/aepo.h. */
#include "common/algo/lm/aepo.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/core/rng.h"

#define S_FORMAT "rlrt.aepo_state"
#define S_VERSION 1

/* One known global_id. The boot_* sums are only non-zero between
 * rl_aepo_bootstrap_add and rl_aepo_bootstrap_finish. */
typedef struct s_entry {
    int64_t gid;
    int bucket; /* RL_AEPO_UNKNOWN until assigned (bootstrap-only ids) */
    double acc; /* mean accuracy that set the bucket */
    int64_t seen; /* batches that assigned a bucket */
    int64_t boot_n;
    double boot_acc, boot_hwe;
} s_entry;

/* Open addressing, linear probing, int64 → index; capacity a power of two
 * kept at least twice the size. Slot value −1 = empty. */
typedef struct s_map {
    int64_t *keys;
    int64_t *vals;
    int64_t cap, size;
} s_map;

struct rl_aepo_state {
    rl_aepo_config cfg;
    int tau_set;
    double tau;
    int64_t tau_steps;
    double alpha[RL_AEPO_NBUCKETS];
    double lambda[RL_AEPO_NBUCKETS];
    double target[RL_AEPO_NBUCKETS];
    int has_target[RL_AEPO_NBUCKETS];
    s_entry *ent;
    int64_t n_ent, cap_ent;
    s_map map;
};

/* ---- hash map ------------------------------------------------------------ */

static void s_map_free(s_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int s_map_init(s_map *m, int64_t want)
{
    int64_t cap = 16;
    while (cap < 2 * want)
        cap *= 2;
    m->keys = malloc(sizeof *m->keys * (size_t)cap);
    m->vals = malloc(sizeof *m->vals * (size_t)cap);
    if (!m->keys || !m->vals) {
        s_map_free(m);
        return rl_error_set(RL_ENOMEM, "aepo: out of memory for an id map of %lld slots",
                            (long long)cap);
    }
    for (int64_t i = 0; i < cap; i++)
        m->vals[i] = -1;
    m->cap = cap;
    m->size = 0;
    return 0;
}

static int64_t s_map_get(const s_map *m, int64_t k)
{
    if (!m->cap)
        return -1;
    for (uint64_t i = rl_splitmix64(k) & (uint64_t)(m->cap - 1);; i = (i + 1) & (uint64_t)(m->cap - 1)) {
        if (m->vals[i] < 0)
            return -1;
        if (m->keys[i] == k)
            return m->vals[i];
    }
}

static void s_map_put_nogrow(s_map *m, int64_t k, int64_t v)
{
    for (uint64_t i = rl_splitmix64(k) & (uint64_t)(m->cap - 1);; i = (i + 1) & (uint64_t)(m->cap - 1)) {
        if (m->vals[i] < 0) {
            m->keys[i] = k;
            m->vals[i] = v;
            m->size++;
            return;
        }
        if (m->keys[i] == k) {
            m->vals[i] = v;
            return;
        }
    }
}

/* k must be absent. */
static int s_map_add(s_map *m, int64_t k, int64_t v)
{
    if (2 * (m->size + 1) > m->cap) {
        s_map bigger;
        int rc = s_map_init(&bigger, m->size + 1 > m->cap ? m->size + 1 : m->cap);
        if (rc)
            return rc;
        for (int64_t i = 0; i < m->cap; i++)
            if (m->vals[i] >= 0)
                s_map_put_nogrow(&bigger, m->keys[i], m->vals[i]);
        s_map_free(m);
        *m = bigger;
    }
    s_map_put_nogrow(m, k, v);
    return 0;
}

/* ---- config ------------------------------------------------------------------ */

void rl_aepo_config_default(rl_aepo_config *c)
{
    static const rl_aepo_config d = {
        .window = 4,
        .percentile = 95.0,
        .tau_decay = 0.99,
        .easy_min_acc = 2.0 / 3.0,
        .medium_min_acc = 1.0 / 3.0,
        .round_targets = 1,
        .alpha_init = 0.5,
        .alpha_lr = 0.05,
        .alpha_min = 0.0,
        .alpha_max = 2.0,
        .lambda_lr = 0.01,
        .lambda_max = 10.0,
        .lambda_min_rows = 8,
        .kl_budget = {0.01, 0.01, 0.01},
        .kl_low_factor = 0.5,
        .margin_frac = {0.15, 0.25, 0.35},
        .kappa = {2.0, 3.0, 4.0},
        .temp = {2.0, 2.5, 3.0},
        .cap_scale = {1.0, 1.0, 1.2},
        .wrong_scale = {0.6, 0.8, 1.0},
    };
    *c = d;
}

int rl_aepo_config_validate(const rl_aepo_config *c)
{
#define S_BAD(cond, field, val)                                                               \
    do {                                                                                       \
        if (cond)                                                                              \
            return rl_error_set(RL_EINVAL, "aepo config: %s = %g is invalid", field,          \
                                (double)(val));                                                \
    } while (0)
    if (!c)
        return rl_error_set(RL_EINVAL, "aepo config: NULL");
    S_BAD(c->window < 1, "window (must be >= 1)", c->window);
    S_BAD(!(c->percentile >= 0 && c->percentile <= 100), "percentile (in [0,100])", c->percentile);
    S_BAD(!(c->tau_decay >= 0 && c->tau_decay <= 1), "tau_decay (in [0,1])", c->tau_decay);
    S_BAD(!isfinite(c->easy_min_acc), "easy_min_acc", c->easy_min_acc);
    S_BAD(!isfinite(c->medium_min_acc) || c->medium_min_acc > c->easy_min_acc,
          "medium_min_acc (finite, <= easy_min_acc)", c->medium_min_acc);
    S_BAD(!isfinite(c->alpha_min), "alpha_min", c->alpha_min);
    S_BAD(!isfinite(c->alpha_max) || c->alpha_max < c->alpha_min, "alpha_max (>= alpha_min)",
          c->alpha_max);
    S_BAD(!(c->alpha_init >= c->alpha_min && c->alpha_init <= c->alpha_max),
          "alpha_init (in [alpha_min, alpha_max])", c->alpha_init);
    S_BAD(!isfinite(c->alpha_lr), "alpha_lr", c->alpha_lr);
    S_BAD(!isfinite(c->lambda_lr), "lambda_lr", c->lambda_lr);
    S_BAD(!(c->lambda_max >= 0) || !isfinite(c->lambda_max), "lambda_max (finite, >= 0)",
          c->lambda_max);
    S_BAD(c->lambda_min_rows < 0, "lambda_min_rows (>= 0)", c->lambda_min_rows);
    S_BAD(!isfinite(c->kl_low_factor) || c->kl_low_factor < 0, "kl_low_factor (>= 0)",
          c->kl_low_factor);
    static const char *nm[RL_AEPO_NBUCKETS] = {"easy", "medium", "hard"};
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++) {
        char f[64];
#define S_BADD(cond, field, val)                                                              \
    do {                                                                                       \
        if (cond) {                                                                            \
            snprintf(f, sizeof f, "%s[%s]", field, nm[d]);                                     \
            return rl_error_set(RL_EINVAL, "aepo config: %s = %g is invalid", f,              \
                                (double)(val));                                                \
        }                                                                                      \
    } while (0)
        S_BADD(!isfinite(c->kl_budget[d]), "kl_budget", c->kl_budget[d]);
        S_BADD(!(c->margin_frac[d] >= 0) || !isfinite(c->margin_frac[d]), "margin_frac",
               c->margin_frac[d]);
        S_BADD(!(c->kappa[d] > 0) || !isfinite(c->kappa[d]), "kappa", c->kappa[d]);
        S_BADD(!(c->temp[d] > 0) || !isfinite(c->temp[d]), "temp", c->temp[d]);
        S_BADD(!isfinite(c->cap_scale[d]), "cap_scale", c->cap_scale[d]);
        S_BADD(!isfinite(c->wrong_scale[d]), "wrong_scale", c->wrong_scale[d]);
#undef S_BADD
    }
#undef S_BAD
    return 0;
}

/* ---- state ------------------------------------------------------------------- */

rl_aepo_state *rl_aepo_state_new(const rl_aepo_config *cfg)
{
    rl_aepo_config d;
    if (!cfg) {
        rl_aepo_config_default(&d);
        cfg = &d;
    }
    if (rl_aepo_config_validate(cfg))
        return NULL;
    rl_aepo_state *s = rl_zalloc(sizeof *s, "rl_aepo_state_new");
    if (!s)
        return NULL;
    s->cfg = *cfg;
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++)
        s->alpha[d] = cfg->alpha_init;
    if (s_map_init(&s->map, 0)) {
        free(s);
        return NULL;
    }
    return s;
}

void rl_aepo_state_free(rl_aepo_state *s)
{
    if (!s)
        return;
    s_map_free(&s->map);
    free(s->ent);
    free(s);
}

const rl_aepo_config *rl_aepo_state_config(const rl_aepo_state *s) { return &s->cfg; }

/* Index of gid's entry, created (bucket unknown) if absent; −1 on ENOMEM. */
static int64_t s_entry_of(rl_aepo_state *s, int64_t gid)
{
    int64_t i = s_map_get(&s->map, gid);
    if (i >= 0)
        return i;
    if (s->n_ent == s->cap_ent) {
        int64_t nc = s->cap_ent ? 2 * s->cap_ent : 64;
        s_entry *ne = realloc(s->ent, sizeof *ne * (size_t)nc);
        if (!ne) {
            rl_error_set(RL_ENOMEM, "aepo: out of memory for %lld ids", (long long)nc);
            return -1;
        }
        s->ent = ne;
        s->cap_ent = nc;
    }
    if (s_map_add(&s->map, gid, s->n_ent))
        return -1;
    s_entry *e = &s->ent[s->n_ent];
    memset(e, 0, sizeof *e);
    e->gid = gid;
    e->bucket = RL_AEPO_UNKNOWN;
    return s->n_ent++;
}

/* ---- threshold ------------------------------------------------------------------ */

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int rl_aepo_threshold_update(rl_aepo_state *s, const float *pct, const uint8_t *has_pct,
                             int64_t B, double *median_out)
{
    const char *fn = "rl_aepo_threshold_update";
    if (median_out)
        *median_out = NAN;
    if (!s || B < 0 || (B > 0 && (!pct || !has_pct)))
        return rl_error_set(RL_EINVAL, "%s: NULL state/array or B=%lld < 0", fn, (long long)B);
    double *v = malloc(sizeof *v * (size_t)(B > 0 ? B : 1));
    if (!v)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", fn);
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++) {
        if (!has_pct[b])
            continue;
        if (!isfinite(pct[b])) {
            free(v);
            return rl_error_set(RL_ENUMERIC, "%s: pct[%lld] = %g", fn, (long long)b,
                                (double)pct[b]);
        }
        v[n++] = pct[b];
    }
    if (n == 0) {
        free(v);
        return 0;
    }
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    double med = (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    if (!s->tau_set) {
        s->tau = med;
        s->tau_set = 1;
    } else {
        double d = s->cfg.tau_decay;
        s->tau = d * s->tau + (1.0 - d) * med;
    }
    s->tau_steps++;
    if (median_out)
        *median_out = med;
    return 0;
}

int rl_aepo_threshold_get(const rl_aepo_state *s, double *tau)
{
    if (!s || !tau)
        return rl_error_set(RL_EINVAL, "rl_aepo_threshold_get: NULL argument");
    if (!s->tau_set)
        return rl_error_set(RL_ESTATE,
                            "rl_aepo_threshold_get: tau not set yet (no batch folded in, no "
                            "rl_aepo_threshold_set)");
    *tau = s->tau;
    return 0;
}

int rl_aepo_threshold_set(rl_aepo_state *s, double tau)
{
    if (!s)
        return rl_error_set(RL_EINVAL, "rl_aepo_threshold_set: NULL state");
    if (!isfinite(tau))
        return rl_error_set(RL_ENUMERIC, "rl_aepo_threshold_set: tau = %g must be finite", tau);
    s->tau = tau;
    s->tau_set = 1;
    return 0;
}

/* ---- difficulty ----------------------------------------------------------------- */

int rl_aepo_bucket_of_accuracy(const rl_aepo_config *cfg, double acc)
{
    if (acc >= cfg->easy_min_acc)
        return RL_AEPO_EASY;
    if (acc >= cfg->medium_min_acc)
        return RL_AEPO_MEDIUM;
    return RL_AEPO_HARD;
}

int rl_aepo_difficulty_get(const rl_aepo_state *s, int64_t gid)
{
    int64_t i = s_map_get(&s->map, gid);
    return i < 0 ? RL_AEPO_UNKNOWN : s->ent[i].bucket;
}

int64_t rl_aepo_difficulty_count(const rl_aepo_state *s)
{
    int64_t n = 0;
    for (int64_t i = 0; i < s->n_ent; i++)
        n += s->ent[i].bucket != RL_AEPO_UNKNOWN;
    return n;
}

/* The state, then the batch's rows (B ids, accuracies and entropies). */
static int s_check_rows(const char *fn, const rl_aepo_state *s, const int64_t *gid,
                        const float *acc, const float *hwe, int64_t B)
{
    if (!s)
        return rl_error_set(RL_EINVAL, "%s: NULL state", fn);
    if (B < 0 || (B > 0 && (!gid || !acc || !hwe)))
        return rl_error_set(RL_EINVAL, "%s: NULL array or B=%lld < 0", fn, (long long)B);
    for (int64_t b = 0; b < B; b++) {
        if (!(acc[b] >= 0 && acc[b] <= 1))
            return rl_error_set(isfinite(acc[b]) ? RL_EINVAL : RL_ENUMERIC,
                                "%s: acc[%lld] = %g, expected a value in [0, 1]", fn,
                                (long long)b, (double)acc[b]);
        if (!isfinite(hwe[b]) || hwe[b] < 0)
            return rl_error_set(isfinite(hwe[b]) ? RL_EINVAL : RL_ENUMERIC,
                                "%s: hwe[%lld] = %g, expected a finite count >= 0", fn,
                                (long long)b, (double)hwe[b]);
    }
    return 0;
}

static void s_stats_clear(rl_aepo_batch_stats *st)
{
    memset(st, 0, sizeof *st);
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++)
        st->mean_hwe[d] = st->mean_acc[d] = NAN;
    st->mean_hwe_all = NAN;
}

/* Adds one id's means to the running per-bucket sums held in st (the means
 * are finalised by s_stats_finish). */
static void s_stats_add(rl_aepo_batch_stats *st, double sums[2][RL_AEPO_NBUCKETS + 1],
                        int bucket, double acc_mean, double hwe_mean, int64_t rows)
{
    st->n_ids[bucket]++;
    st->n_rows[bucket] += rows;
    st->n_ids_all++;
    sums[0][bucket] += hwe_mean;
    sums[1][bucket] += acc_mean;
    sums[0][RL_AEPO_NBUCKETS] += hwe_mean;
}

static void s_stats_finish(rl_aepo_batch_stats *st, double sums[2][RL_AEPO_NBUCKETS + 1])
{
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++)
        if (st->n_ids[d]) {
            st->mean_hwe[d] = sums[0][d] / (double)st->n_ids[d];
            st->mean_acc[d] = sums[1][d] / (double)st->n_ids[d];
        }
    if (st->n_ids_all)
        st->mean_hwe_all = sums[0][RL_AEPO_NBUCKETS] / (double)st->n_ids_all;
}

int rl_aepo_difficulty_observe(rl_aepo_state *s, const int64_t *gid, const float *acc,
                               const float *hwe, int64_t B, int8_t *bucket_out,
                               rl_aepo_batch_stats *stats)
{
    const char *fn = "rl_aepo_difficulty_observe";
    int rc = s_check_rows(fn, s, gid, acc, hwe, B);
    if (rc)
        return rc;
    /* Group the batch's rows by id, in order of first appearance, so the
     * per-bucket sums have a fixed order. */
    s_map g;
    rc = s_map_init(&g, B);
    if (rc)
        return rc;
    int64_t *first = malloc(sizeof *first * (size_t)(B > 0 ? B : 1));
    int64_t *grp = malloc(sizeof *grp * (size_t)(B > 0 ? B : 1));
    double *sacc = calloc((size_t)(B > 0 ? B : 1), sizeof *sacc);
    double *shwe = calloc((size_t)(B > 0 ? B : 1), sizeof *shwe);
    int64_t *cnt = calloc((size_t)(B > 0 ? B : 1), sizeof *cnt);
    int64_t ng = 0;
    if (!first || !grp || !sacc || !shwe || !cnt) {
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", fn);
        goto out;
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t k = s_map_get(&g, gid[b]);
        if (k < 0) {
            k = ng++;
            first[k] = b;
            if ((rc = s_map_add(&g, gid[b], k)))
                goto out;
        }
        grp[b] = k;
        sacc[k] += acc[b];
        shwe[k] += hwe[b];
        cnt[k]++;
    }
    rl_aepo_batch_stats st;
    s_stats_clear(&st);
    double sums[2][RL_AEPO_NBUCKETS + 1] = {{0}};
    int8_t *bucket_of_group = malloc((size_t)(ng > 0 ? ng : 1));
    if (!bucket_of_group) {
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", fn);
        goto out;
    }
    for (int64_t k = 0; k < ng; k++) {
        double am = sacc[k] / (double)cnt[k], hm = shwe[k] / (double)cnt[k];
        int bk = rl_aepo_bucket_of_accuracy(&s->cfg, am);
        int64_t e = s_entry_of(s, gid[first[k]]);
        if (e < 0) {
            free(bucket_of_group);
            rc = rl_error_code();
            goto out;
        }
        s->ent[e].bucket = bk;
        s->ent[e].acc = am;
        s->ent[e].seen++;
        bucket_of_group[k] = (int8_t)bk;
        s_stats_add(&st, sums, bk, am, hm, cnt[k]);
    }
    s_stats_finish(&st, sums);
    if (bucket_out)
        for (int64_t b = 0; b < B; b++)
            bucket_out[b] = bucket_of_group[grp[b]];
    if (stats)
        *stats = st;
    free(bucket_of_group);
out:
    s_map_free(&g);
    free(first);
    free(grp);
    free(sacc);
    free(shwe);
    free(cnt);
    return rc;
}

int rl_aepo_alpha_update(rl_aepo_state *s, const rl_aepo_batch_stats *st)
{
    if (!s || !st)
        return rl_error_set(RL_EINVAL, "rl_aepo_alpha_update: NULL argument");
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++) {
        if (st->n_ids[d] == 0 || !s->has_target[d])
            continue;
        double delta = d == RL_AEPO_HARD ? s->target[d] - st->mean_hwe[d]
                                         : st->mean_hwe[d] - s->target[d];
        double a = s->alpha[d] + s->cfg.alpha_lr * delta;
        if (a < s->cfg.alpha_min)
            a = s->cfg.alpha_min;
        if (a > s->cfg.alpha_max)
            a = s->cfg.alpha_max;
        s->alpha[d] = a;
    }
    return 0;
}

static double s_round_half_even(double x)
{
    double r = floor(x), f = x - r;
    if (f > 0.5)
        return r + 1;
    if (f < 0.5)
        return r;
    return fmod(r, 2.0) == 0 ? r : r + 1;
}

int rl_aepo_targets_update(rl_aepo_state *s, const rl_aepo_batch_stats *st)
{
    if (!s || !st)
        return rl_error_set(RL_EINVAL, "rl_aepo_targets_update: NULL argument");
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++) {
        double t;
        if (st->n_ids[d] > 0)
            t = st->mean_hwe[d];
        else if (!s->has_target[d] && st->n_ids_all > 0)
            t = st->mean_hwe_all;
        else
            continue;
        s->target[d] = s->cfg.round_targets ? s_round_half_even(t) : t;
        s->has_target[d] = 1;
    }
    return 0;
}

int rl_aepo_update(rl_aepo_state *s, const int64_t *gid, const float *acc,
                   const float *hwe, int64_t B, int8_t *bucket_out,
                   rl_aepo_batch_stats *stats)
{
    rl_aepo_batch_stats st;
    int rc = rl_aepo_difficulty_observe(s, gid, acc, hwe, B, bucket_out, &st);
    if (rc)
        return rc;
    rl_aepo_alpha_update(s, &st);
    rl_aepo_targets_update(s, &st);
    if (stats)
        *stats = st;
    return 0;
}

int rl_aepo_bootstrap_add(rl_aepo_state *s, const int64_t *gid, const float *acc,
                          const float *hwe, int64_t B)
{
    const char *fn = "rl_aepo_bootstrap_add";
    int rc = s_check_rows(fn, s, gid, acc, hwe, B);
    if (rc)
        return rc;
    for (int64_t b = 0; b < B; b++) {
        int64_t e = s_entry_of(s, gid[b]);
        if (e < 0)
            return rl_error_code();
        s->ent[e].boot_n++;
        s->ent[e].boot_acc += acc[b];
        s->ent[e].boot_hwe += hwe[b];
    }
    return 0;
}

int rl_aepo_bootstrap_finish(rl_aepo_state *s, rl_aepo_batch_stats *stats)
{
    if (!s)
        return rl_error_set(RL_EINVAL, "rl_aepo_bootstrap_finish: NULL state");
    rl_aepo_batch_stats st;
    s_stats_clear(&st);
    double sums[2][RL_AEPO_NBUCKETS + 1] = {{0}};
    /* Entries are in order of first appearance, like the online grouping. */
    for (int64_t i = 0; i < s->n_ent; i++) {
        s_entry *e = &s->ent[i];
        if (e->boot_n == 0)
            continue;
        double am = e->boot_acc / (double)e->boot_n, hm = e->boot_hwe / (double)e->boot_n;
        int bk = rl_aepo_bucket_of_accuracy(&s->cfg, am);
        e->bucket = bk;
        e->acc = am;
        e->seen++;
        s_stats_add(&st, sums, bk, am, hm, e->boot_n);
        e->boot_n = 0;
        e->boot_acc = e->boot_hwe = 0;
    }
    s_stats_finish(&st, sums);
    rl_aepo_targets_update(s, &st);
    if (stats)
        *stats = st;
    return 0;
}

static int s_bucket_ok(int d) { return d >= 0 && d < RL_AEPO_NBUCKETS; }

double rl_aepo_alpha(const rl_aepo_state *s, int d) { return s_bucket_ok(d) ? s->alpha[d] : NAN; }
double rl_aepo_lambda(const rl_aepo_state *s, int d) { return s_bucket_ok(d) ? s->lambda[d] : NAN; }

double rl_aepo_target(const rl_aepo_state *s, int d, int *has_target)
{
    if (!s_bucket_ok(d)) {
        if (has_target)
            *has_target = 0;
        return NAN;
    }
    if (has_target)
        *has_target = s->has_target[d];
    return s->has_target[d] ? s->target[d] : 0.0;
}

int rl_aepo_set_alpha(rl_aepo_state *s, int d, double a)
{
    if (!s_bucket_ok(d) || !(a >= s->cfg.alpha_min && a <= s->cfg.alpha_max))
        return rl_error_set(RL_EINVAL, "rl_aepo_set_alpha: bucket %d, alpha %g not in [%g, %g]", d,
                            a, s->cfg.alpha_min, s->cfg.alpha_max);
    s->alpha[d] = a;
    return 0;
}

int rl_aepo_set_target(rl_aepo_state *s, int d, double t)
{
    if (!s_bucket_ok(d) || !isfinite(t) || t < 0)
        return rl_error_set(RL_EINVAL, "rl_aepo_set_target: bucket %d, target %g (finite >= 0)",
                            d, t);
    s->target[d] = t;
    s->has_target[d] = 1;
    return 0;
}

/* ---- dual ascent -------------------------------------------------------------- */

int rl_aepo_lambda_update(rl_aepo_state *s, const float *kl, const float *mask,
                          const int8_t *bucket, int64_t B, int64_t T, double *kl_out)
{
    const char *fn = "rl_aepo_lambda_update";
    if (!s || B < 0 || T < 0 || (B > 0 && (!bucket || (T > 0 && (!kl || !mask)))))
        return rl_error_set(RL_EINVAL, "%s: NULL argument or negative size", fn);
    double sum[RL_AEPO_NBUCKETS] = {0};
    int64_t n[RL_AEPO_NBUCKETS] = {0};
    for (int64_t b = 0; b < B; b++) {
        if (!s_bucket_ok(bucket[b]))
            return rl_error_set(RL_EINVAL, "%s: bucket[%lld] = %d, expected 0..2", fn,
                                (long long)b, bucket[b]);
        double a = 0;
        int64_t c = 0;
        for (int64_t t = 0; t < T; t++) {
            if (mask[b * T + t] == 0)
                continue;
            float v = kl[b * T + t];
            if (!isfinite(v))
                return rl_error_set(RL_ENUMERIC, "%s: kl[%lld,%lld] = %g at a valid position",
                                    fn, (long long)b, (long long)t, (double)v);
            a += v;
            c++;
        }
        if (c == 0)
            continue; /* an empty response carries no KL information */
        sum[bucket[b]] += a / (double)c;
        n[bucket[b]]++;
    }
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++) {
        double kd = n[d] ? sum[d] / (double)n[d] : NAN;
        if (kl_out)
            kl_out[d] = kd;
        if (n[d] == 0 || n[d] < s->cfg.lambda_min_rows)
            continue;
        double l = s->lambda[d] + s->cfg.lambda_lr * (kd - s->cfg.kl_budget[d]);
        if (l < 0)
            l = 0;
        if (l > s->cfg.lambda_max)
            l = s->cfg.lambda_max;
        s->lambda[d] = l;
    }
    return 0;
}

/* ---- JSON ------------------------------------------------------------------- */

static json_t *s_darr(const double *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

char *rl_aepo_state_to_json(const rl_aepo_state *s)
{
    if (!s) {
        rl_error_set(RL_EINVAL, "rl_aepo_state_to_json: NULL state");
        return NULL;
    }
    const rl_aepo_config *c = &s->cfg;
    json_t *cfg = json_pack(
        "{s:i, s:f, s:f, s:f, s:f, s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:f}",
        "window", c->window, "percentile", c->percentile, "tau_decay", c->tau_decay,
        "easy_min_acc", c->easy_min_acc, "medium_min_acc", c->medium_min_acc, "round_targets",
        c->round_targets, "alpha_init", c->alpha_init, "alpha_lr", c->alpha_lr, "alpha_min",
        c->alpha_min, "alpha_max", c->alpha_max, "lambda_lr", c->lambda_lr, "lambda_max",
        c->lambda_max, "lambda_min_rows", c->lambda_min_rows, "kl_low_factor", c->kl_low_factor);
    if (!cfg) {
        rl_error_set(RL_ENOMEM, "rl_aepo_state_to_json: out of memory");
        return NULL;
    }
    json_object_set_new(cfg, "kl_budget", s_darr(c->kl_budget, RL_AEPO_NBUCKETS));
    json_object_set_new(cfg, "margin_frac", s_darr(c->margin_frac, RL_AEPO_NBUCKETS));
    json_object_set_new(cfg, "kappa", s_darr(c->kappa, RL_AEPO_NBUCKETS));
    json_object_set_new(cfg, "temp", s_darr(c->temp, RL_AEPO_NBUCKETS));
    json_object_set_new(cfg, "cap_scale", s_darr(c->cap_scale, RL_AEPO_NBUCKETS));
    json_object_set_new(cfg, "wrong_scale", s_darr(c->wrong_scale, RL_AEPO_NBUCKETS));

    json_t *has = json_array();
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++)
        json_array_append_new(has, json_boolean(s->has_target[d]));

    /* ids in insertion order (the order bootstrap_finish sums in, so a
     * restored state sums identically); each row is [gid, bucket, acc,
     * seen, boot_n, boot_acc, boot_hwe]. */
    json_t *ids = json_array();
    if (!ids) {
        json_decref(cfg);
        json_decref(has);
        rl_error_set(RL_ENOMEM, "rl_aepo_state_to_json: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < s->n_ent; i++) {
        const s_entry *e = &s->ent[i];
        json_array_append_new(ids, json_pack("[I, i, f, I, I, f, f]", (json_int_t)e->gid,
                                             e->bucket, e->acc, (json_int_t)e->seen,
                                             (json_int_t)e->boot_n, e->boot_acc, e->boot_hwe));
    }
    json_t *root = json_pack("{s:s, s:i, s:o, s:{s:b, s:f, s:I}, s:o, s:o, s:o, s:o, s:o}",
                             "format", S_FORMAT, "version", S_VERSION, "config", cfg, "tau",
                             "set", s->tau_set, "value", s->tau_set ? s->tau : 0.0, "steps",
                             (json_int_t)s->tau_steps, "alpha",
                             s_darr(s->alpha, RL_AEPO_NBUCKETS), "lambda",
                             s_darr(s->lambda, RL_AEPO_NBUCKETS), "target",
                             s_darr(s->target, RL_AEPO_NBUCKETS), "has_target", has, "ids", ids);
    if (!root) {
        rl_error_set(RL_ENOMEM, "rl_aepo_state_to_json: building the JSON failed");
        return NULL;
    }
    char *out = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (!out)
        rl_error_set(RL_ENOMEM, "rl_aepo_state_to_json: json_dumps failed");
    return out;
}

/* Reading helpers: each sets an RL_EPROTO message naming the key. */
static int s_get_num(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_number(v))
        return rl_error_set(RL_EPROTO, "aepo state JSON: '%s' missing or not a number", key);
    *out = json_number_value(v);
    return 0;
}

static int s_get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return rl_error_set(RL_EPROTO, "aepo state JSON: '%s' missing or not an integer in "
                            "[%lld, %lld]", key, (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    return 0;
}

static int s_get_bool(json_t *o, const char *key, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_boolean(v))
        return rl_error_set(RL_EPROTO, "aepo state JSON: '%s' missing or not a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static int s_get_darr(json_t *o, const char *key, double *out)
{
    json_t *a = json_object_get(o, key);
    if (!a || !json_is_array(a) || json_array_size(a) != RL_AEPO_NBUCKETS)
        return rl_error_set(RL_EPROTO, "aepo state JSON: '%s' must be an array of %d numbers",
                            key, RL_AEPO_NBUCKETS);
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++) {
        json_t *v = json_array_get(a, (size_t)d);
        if (!json_is_number(v))
            return rl_error_set(RL_EPROTO, "aepo state JSON: '%s'[%d] is not a number", key, d);
        out[d] = json_number_value(v);
    }
    return 0;
}

static int s_parse_config(json_t *c, rl_aepo_config *cfg)
{
    if (!c || !json_is_object(c))
        return rl_error_set(RL_EPROTO, "aepo state JSON: 'config' missing or not an object");
    int64_t w, mr;
    int rc = 0;
    rc = rc ? rc : s_get_int(c, "window", 1, INT32_MAX, &w);
    rc = rc ? rc : s_get_num(c, "percentile", &cfg->percentile);
    rc = rc ? rc : s_get_num(c, "tau_decay", &cfg->tau_decay);
    rc = rc ? rc : s_get_num(c, "easy_min_acc", &cfg->easy_min_acc);
    rc = rc ? rc : s_get_num(c, "medium_min_acc", &cfg->medium_min_acc);
    rc = rc ? rc : s_get_bool(c, "round_targets", &cfg->round_targets);
    rc = rc ? rc : s_get_num(c, "alpha_init", &cfg->alpha_init);
    rc = rc ? rc : s_get_num(c, "alpha_lr", &cfg->alpha_lr);
    rc = rc ? rc : s_get_num(c, "alpha_min", &cfg->alpha_min);
    rc = rc ? rc : s_get_num(c, "alpha_max", &cfg->alpha_max);
    rc = rc ? rc : s_get_num(c, "lambda_lr", &cfg->lambda_lr);
    rc = rc ? rc : s_get_num(c, "lambda_max", &cfg->lambda_max);
    rc = rc ? rc : s_get_int(c, "lambda_min_rows", 0, INT32_MAX, &mr);
    rc = rc ? rc : s_get_num(c, "kl_low_factor", &cfg->kl_low_factor);
    rc = rc ? rc : s_get_darr(c, "kl_budget", cfg->kl_budget);
    rc = rc ? rc : s_get_darr(c, "margin_frac", cfg->margin_frac);
    rc = rc ? rc : s_get_darr(c, "kappa", cfg->kappa);
    rc = rc ? rc : s_get_darr(c, "temp", cfg->temp);
    rc = rc ? rc : s_get_darr(c, "cap_scale", cfg->cap_scale);
    rc = rc ? rc : s_get_darr(c, "wrong_scale", cfg->wrong_scale);
    if (rc)
        return rc;
    cfg->window = (int)w;
    cfg->lambda_min_rows = (int)mr;
    if ((rc = rl_aepo_config_validate(cfg)))
        return rl_error_wrap(RL_EPROTO, "aepo state JSON");
    return 0;
}

static int s_parse_state(json_t *root, rl_aepo_state **out)
{
    if (!json_is_object(root))
        return rl_error_set(RL_EPROTO, "aepo state JSON: top level is not an object");
    json_t *f = json_object_get(root, "format");
    if (!json_is_string(f) || strcmp(json_string_value(f), S_FORMAT) != 0)
        return rl_error_set(RL_EPROTO, "aepo state JSON: 'format' must be \"%s\"", S_FORMAT);
    int64_t ver;
    int rc = s_get_int(root, "version", S_VERSION, S_VERSION, &ver);
    if (rc)
        return rc;
    rl_aepo_config cfg;
    rl_aepo_config_default(&cfg);
    if ((rc = s_parse_config(json_object_get(root, "config"), &cfg)))
        return rc;
    rl_aepo_state *s = rl_aepo_state_new(&cfg);
    if (!s)
        return rl_error_code();
    json_t *tau = json_object_get(root, "tau");
    if (!json_is_object(tau)) {
        rc = rl_error_set(RL_EPROTO, "aepo state JSON: 'tau' missing or not an object");
        goto fail;
    }
    int64_t steps;
    if ((rc = s_get_bool(tau, "set", &s->tau_set)) || (rc = s_get_num(tau, "value", &s->tau)) ||
        (rc = s_get_int(tau, "steps", 0, INT64_MAX, &steps)))
        goto fail;
    s->tau_steps = steps;
    if (!isfinite(s->tau)) {
        rc = rl_error_set(RL_EPROTO, "aepo state JSON: tau.value is not finite");
        goto fail;
    }
    if ((rc = s_get_darr(root, "alpha", s->alpha)) || (rc = s_get_darr(root, "lambda", s->lambda)) ||
        (rc = s_get_darr(root, "target", s->target)))
        goto fail;
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++)
        if (!(s->alpha[d] >= cfg.alpha_min && s->alpha[d] <= cfg.alpha_max) ||
            !(s->lambda[d] >= 0 && s->lambda[d] <= cfg.lambda_max) || !isfinite(s->target[d]) ||
            s->target[d] < 0) {
            rc = rl_error_set(RL_EPROTO,
                              "aepo state JSON: bucket %s has alpha %g / lambda %g / target %g "
                              "outside their ranges", rl_aepo_bucket_name(d), s->alpha[d],
                              s->lambda[d], s->target[d]);
            goto fail;
        }
    json_t *has = json_object_get(root, "has_target");
    if (!json_is_array(has) || json_array_size(has) != RL_AEPO_NBUCKETS) {
        rc = rl_error_set(RL_EPROTO, "aepo state JSON: 'has_target' must be 3 booleans");
        goto fail;
    }
    for (int d = 0; d < RL_AEPO_NBUCKETS; d++) {
        json_t *v = json_array_get(has, (size_t)d);
        if (!json_is_boolean(v)) {
            rc = rl_error_set(RL_EPROTO, "aepo state JSON: 'has_target'[%d] is not a boolean", d);
            goto fail;
        }
        s->has_target[d] = json_is_true(v);
    }
    json_t *ids = json_object_get(root, "ids");
    if (!json_is_array(ids)) {
        rc = rl_error_set(RL_EPROTO, "aepo state JSON: 'ids' missing or not an array");
        goto fail;
    }
    size_t i;
    json_t *row;
    json_array_foreach(ids, i, row) {
        json_int_t gid, seen, bn, bucket; /* "I": a wide bucket is refused, not wrapped */
        double acc, ba, bh;
        json_error_t err;
        err.text[0] = '\0';
        if (json_unpack_ex(row, &err, JSON_STRICT, "[I, I, F, I, I, F, F]", &gid, &bucket, &acc,
                           &seen, &bn, &ba, &bh) != 0 ||
            bucket < RL_AEPO_UNKNOWN || bucket >= RL_AEPO_NBUCKETS || seen < 0 || bn < 0 ||
            !isfinite(acc) || !isfinite(ba) || !isfinite(bh)) {
            rc = rl_error_set(RL_EPROTO, "aepo state JSON: ids[%zu] is malformed (%s)", i,
                              err.text[0] ? err.text : "value out of range");
            goto fail;
        }
        if (s_map_get(&s->map, gid) >= 0) {
            rc = rl_error_set(RL_EPROTO, "aepo state JSON: ids[%zu]: duplicate gid %lld", i,
                              (long long)gid);
            goto fail;
        }
        int64_t e = s_entry_of(s, gid);
        if (e < 0) {
            rc = rl_error_code();
            goto fail;
        }
        s->ent[e].bucket = (int)bucket;
        s->ent[e].acc = acc;
        s->ent[e].seen = seen;
        s->ent[e].boot_n = bn;
        s->ent[e].boot_acc = ba;
        s->ent[e].boot_hwe = bh;
    }
    *out = s;
    return 0;
fail:
    rl_aepo_state_free(s);
    return rc;
}

rl_aepo_state *rl_aepo_state_from_json(const char *text)
{
    if (!text) {
        rl_error_set(RL_EINVAL, "rl_aepo_state_from_json: NULL text");
        return NULL;
    }
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    if (!root) {
        rl_error_set(RL_EPROTO, "aepo state JSON: parse error at line %d column %d: %s", err.line,
                     err.column, err.text);
        return NULL;
    }
    rl_aepo_state *s = NULL;
    s_parse_state(root, &s);
    json_decref(root);
    return s;
}
