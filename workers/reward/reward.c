/* workers/reward/reward.c — the reward role (contract: rlrt/roles/reward.h):
 * verifiable rewards (rlrt/reward.h) for a batch of decoded responses. The
 * reward.* section is read and range-checked once, in init; a call carries
 * no settings. */
#include "../roles.h"

#include "rlrt/error.h"
#include "rlrt/reward.h"
#include "rlrt/roles/reward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct s_state {
    rl_reward_config cfg;
    char *default_source; /* owned copy (the config tree may be replaced) */
} s_state;

static int s_init(rl_worker_ctx *ctx)
{
    rl_reward_role_config o;
    int rc = rl_reward_role_config_read(ctx->config, &o);
    if (rc)
        return rc;
    s_state *st = calloc(1, sizeof *st);
    if (!st || (o.default_source && !(st->default_source = strdup(o.default_source)))) {
        free(st);
        return rl_error_set(RL_ENOMEM, "reward: out of memory");
    }
    rl_reward_config_default(&st->cfg);
    st->cfg.format_weight = o.format_weight;
    st->cfg.last_number_fallback = o.last_number_fallback;
    st->cfg.math_last_number_fallback = o.math_last_number_fallback;
    st->cfg.default_source = st->default_source;
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
                     "missing column '%s' (expected a string column, one "
                     "cell per row)",
                     name);
        return NULL;
    }
    if (rl_column_get_type(c) != RL_COL_STRING) {
        rl_error_set(RL_EDTYPE, "column '%s' is %s, expected string", name,
                     rl_column_type_name(rl_column_get_type(c)));
        return NULL;
    }
    return c;
}

static int s_compute_reward(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    const s_state *st = ctx->user;
    const rl_reward_config cfg = st->cfg;
    const rl_column *resp = s_string_column(in, RL_REWARD_RESPONSE);
    const rl_column *gt = resp ? s_string_column(in, RL_REWARD_GROUND_TRUTH) : NULL;
    const rl_column *src = gt ? s_string_column(in, RL_REWARD_DATA_SOURCE) : NULL;
    if (!src)
        return rl_error_code();
    int64_t rows = rl_dataproto_rows(in);
    if (rows < 0)
        rows = 0;
    const float *extra = NULL;
    if (rl_dataproto_tensor(in, RL_REWARD_EXTRA)) {
        const rl_tensor *t = rl_dataproto_tensor_shaped(in, RL_REWARD_EXTRA, RL_F32, 1, NULL);
        if (!t)
            return rl_error_code();
        extra = rl_tensor_data((rl_tensor *)t);
    }
    rl_dataproto *o = rl_dataproto_new();
    if (!o)
        return rl_error_code();
    int64_t shape[1] = {rows};
    rl_tensor *ts = rl_dataproto_new_tensor(o, RL_REWARD_SCORE, RL_F32, 1, shape);
    rl_tensor *ta = ts ? rl_dataproto_new_tensor(o, RL_REWARD_ACCURACY, RL_F32, 1, shape) : NULL;
    rl_tensor *tf = ta ? rl_dataproto_new_tensor(o, RL_REWARD_FORMAT, RL_F32, 1, shape) : NULL;
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
            return rl_error_wrap(rc, "row %lld", (long long)i);
        }
        score[i] = (float)r.score;
        acc[i] = (float)r.accuracy;
        fmt[i] = (float)r.format;
    }
    *out = o;
    return RL_OK;
}

static const rl_method s_methods[] = {{RL_REWARD_COMPUTE, s_compute_reward}, {NULL, NULL}};

const rl_worker_role rl_role_reward = {RL_REWARD_ROLE, s_methods, s_init, s_fini};
