/* workers/reward/reward.c — method table of the reward role.
 *
 * compute_reward: verifiable rewards (rlrt/reward.h) for a batch of decoded
 * responses. Input columns (strings, B rows): response, ground_truth,
 * data_source; optional f32 tensor extra_reward (B) added to the overall
 * score; meta format_weight overrides the configured one. Output: the same
 * rows in the same order with f32 tensors score, accuracy, format (B each).
 *
 * Config (the job's `reward:` subtree, all optional): format_weight (0.1),
 * last_number_fallback (true), math_last_number_fallback (false),
 * default_data_source (none: an unknown data_source is an error). The same
 * keys are also accepted below a `reward.` prefix. */
#include "../roles.h"

#include "rlrt/error.h"
#include "rlrt/reward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct s_state {
    rl_reward_config cfg;
    char *default_source; /* owned copy (the config tree may be replaced) */
} s_state;

/* Reads `key` or `reward.key` from the config. */
static const char *s_key(const rl_config *c, const char *key, char *buf, size_t cap)
{
    if (c && rl_config_has(c, key))
        return key;
    snprintf(buf, cap, "reward.%s", key);
    return buf;
}

static int s_init(rl_worker_ctx *ctx)
{
    s_state *st = calloc(1, sizeof *st);
    if (!st)
        return rl_error_set(RL_ENOMEM, "reward: out of memory");
    rl_reward_config_default(&st->cfg);
    const rl_config *c = ctx->config;
    if (c) {
        char buf[96];
        int fb = st->cfg.last_number_fallback, mfb = st->cfg.math_last_number_fallback;
        const char *def = NULL;
        int rc = rl_config_get_double_or(c, s_key(c, "format_weight", buf, sizeof buf),
                                         st->cfg.format_weight, &st->cfg.format_weight);
        if (!rc)
            rc = rl_config_get_bool_or(c, s_key(c, "last_number_fallback", buf, sizeof buf), fb,
                                       &st->cfg.last_number_fallback);
        if (!rc)
            rc = rl_config_get_bool_or(c, s_key(c, "math_last_number_fallback", buf, sizeof buf),
                                       mfb, &st->cfg.math_last_number_fallback);
        if (!rc)
            rc = rl_config_get_string_or(c, s_key(c, "default_data_source", buf, sizeof buf),
                                         NULL, &def);
        if (rc) {
            free(st);
            return rc;
        }
        if (!(st->cfg.format_weight >= 0.0 && st->cfg.format_weight <= 1.0)) {
            double w = st->cfg.format_weight;
            free(st);
            return rl_error_set(RL_ECONFIG, "reward.format_weight must be in [0, 1], got %g", w);
        }
        if (def) {
            st->default_source = strdup(def);
            if (!st->default_source) {
                free(st);
                return rl_error_set(RL_ENOMEM, "reward: out of memory");
            }
            rl_verifier v;
            if (rl_reward_verifier_for(NULL, def, &v)) {
                free(st->default_source);
                free(st);
                return rl_error_wrap(RL_ECONFIG, "reward.default_data_source");
            }
            st->cfg.default_source = st->default_source;
        }
    }
    ctx->user = st;
    return RL_OK;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_state *st = ctx->user;
    if (st) {
        free(st->default_source);
        free(st);
    }
    ctx->user = NULL;
}

static const rl_column *s_string_column(const rl_dataproto *in, const char *name)
{
    const rl_column *c = rl_dataproto_column(in, name);
    if (!c) {
        rl_error_set(RL_ENOTFOUND,
                     "compute_reward: missing column '%s' (expected a string column, one "
                     "cell per row)",
                     name);
        return NULL;
    }
    if (rl_column_get_type(c) != RL_COL_STRING) {
        rl_error_set(RL_EDTYPE, "compute_reward: column '%s' is %s, expected string", name,
                     rl_column_type_name(rl_column_get_type(c)));
        return NULL;
    }
    return c;
}

static int s_compute_reward(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_state *st = ctx->user;
    rl_reward_config cfg;
    if (st)
        cfg = st->cfg;
    else
        rl_reward_config_default(&cfg);
    const json_t *fw = json_object_get(rl_dataproto_meta_const(in), "format_weight");
    if (fw) {
        if (!json_is_number(fw))
            return rl_error_set(RL_EINVAL, "compute_reward: meta 'format_weight' must be a "
                                           "number in [0, 1]");
        cfg.format_weight = json_number_value(fw);
    }
    const rl_column *resp = s_string_column(in, "response");
    const rl_column *gt = resp ? s_string_column(in, "ground_truth") : NULL;
    const rl_column *src = gt ? s_string_column(in, "data_source") : NULL;
    if (!src)
        return rl_error_code();
    int64_t rows = rl_dataproto_rows(in);
    if (rows < 0)
        rows = 0;
    const float *extra = NULL;
    if (rl_dataproto_tensor(in, "extra_reward")) {
        const rl_tensor *t = rl_dataproto_tensor_typed(in, "extra_reward", RL_F32);
        if (!t)
            return rl_error_wrap(rl_error_code(), "compute_reward");
        if (t->ndim != 1)
            return rl_error_set(RL_ESHAPE,
                                "compute_reward: tensor 'extra_reward' must be f32 (B) = (%lld), "
                                "got %d dims",
                                (long long)rows, t->ndim);
        extra = rl_tensor_data((rl_tensor *)t);
    }
    rl_dataproto *o = rl_dataproto_new();
    if (!o)
        return rl_error_code();
    int64_t shape[1] = {rows};
    rl_tensor *ts = rl_dataproto_new_tensor(o, "score", RL_F32, 1, shape);
    rl_tensor *ta = ts ? rl_dataproto_new_tensor(o, "accuracy", RL_F32, 1, shape) : NULL;
    rl_tensor *tf = ta ? rl_dataproto_new_tensor(o, "format", RL_F32, 1, shape) : NULL;
    if (!tf) {
        rl_dataproto_free(o);
        return rl_error_code();
    }
    float *score = rl_tensor_data(ts), *acc = rl_tensor_data(ta), *fmt = rl_tensor_data(tf);
    for (int64_t i = 0; i < rows; i++) {
        rl_reward_result r;
        int rc = rl_reward_score(&cfg, rl_column_str(src, i), rl_column_str(resp, i),
                                 rl_column_str(gt, i), extra ? (double)extra[i] : 0.0, &r);
        if (rc) {
            rl_dataproto_free(o);
            return rl_error_wrap(rc, "compute_reward: row %lld", (long long)i);
        }
        score[i] = (float)r.score;
        acc[i] = (float)r.accuracy;
        fmt[i] = (float)r.format;
    }
    *out = o;
    return RL_OK;
}

static const rl_method s_methods[] = {{"compute_reward", s_compute_reward}, {NULL, NULL}};

const rl_worker_role rl_role_reward = {"reward", s_methods, s_init, s_fini};
