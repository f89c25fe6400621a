/* rlvr_gen.c — the gen phase of the rlvr recipe: rounds of sampling and
 * scoring until a step's batch is full (see rlvr_gen.h). */
#include "driver/recipes/lm/rlvr_gen.h"

#include <stdio.h>
#include <string.h>

#include "common/batch/lm_metrics.h"
#include "common/core/rng.h"
#include "common/schema/rollout.h"
#include "driver/recipes/lm/rlvr_guidance.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/tensor.h"

#define S_ALGO(field) RL_CFG_PATH(&rl_rlvr_section, rl_rlvr_config, field)
#define S_STALENESS RL_CFG_PATH(&rl_rlvr_trainer_section, rl_rlvr_trainer_config, staleness)

int rl_rlvr_gen_open(rl_rlvr_gen *g, rl_lm_job *j, const rl_config *job, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->j = j;
    g->seed = seed;
    if (!(g->algo = rl_config_section_get(job, &rl_rlvr_section)) ||
        !(g->tc = rl_config_section_get(job, &rl_rlvr_trainer_section)) ||
        !(g->guide = rl_config_section_get(job, &rl_rlvr_guidance_section)))
        return rl_error_code();
    const rl_rlvr_config *a = g->algo;
    g->overlong = (rl_lm_overlong){a->overlong_filter, a->overlong_enable, a->overlong_len,
                                   a->overlong_factor, j->eos};
    g->filter = (rl_lm_filter){a->filter_key, S_ALGO(filter_key), a->filter_mode == 1,
                               a->filter_low, a->filter_high, j->rollout_cfg.n};
    g->async.staleness = g->tc->staleness;
    const rl_rollout_tokens_config *k = rl_config_section_get(job, &rl_rollout_tokens_section);
    if (!k)
        return rl_error_code();
    g->partial = k->partial_rollouts;
    return rl_rlvr_replay_open(&g->replay, job, j->train);
}

void rl_rlvr_gen_close(rl_rlvr_gen *g)
{
    rl_rlvr_async_close(&g->async);
    rl_rlvr_replay_close(&g->replay);
    memset(g, 0, sizeof *g);
}

/* The first half of a round: `prompts` prompts repeated n times (group =
 * the prompt's global id) with their sampling seeds, sent to the rollout
 * ranks (*f). */
static int s_round_start(rl_rlvr_gen *g, int64_t step, int64_t round, int64_t prompts,
                         rl_dataproto **out, rl_future **f)
{
    rl_dataproto *p = NULL;
    int rc = rl_rlvr_replay_prompts(&g->replay, g->j->it, prompts, round == 0, &p);
    if (rc)
        return rc;
    rl_dataproto *dp = rl_dataproto_repeat(p, g->j->rollout_cfg.n, 1);
    rl_dataproto_free(p);
    if (!dp)
        return rl_error_code();
    int64_t B = rl_dataproto_rows(dp), shape[1] = {B};
    rl_tensor *st = rl_dataproto_new_tensor(dp, RL_LM_ROW_SEEDS, RL_I64, 1, shape);
    if (!st)
        rc = rl_error_code();
    int64_t *seeds = st ? rl_tensor_data(st) : NULL;
    for (int64_t b = 0; !rc && b < B; b++)
        seeds[b] = (int64_t)rl_splitmix64(g->seed ^
                                          rl_splitmix64((uint64_t)step * 1000003u + (uint64_t)round) ^
                                          rl_splitmix64((uint64_t)b));
    if (!rc)
        rc = rl_lm_job_encode_prompts(g->j, dp);
    if (!rc)
        rc = rl_lm_job_rollout_start(g->j, dp, 0, f);
    if (rc) {
        rl_dataproto_free(dp);
        return rc;
    }
    *out = dp;
    return RL_OK;
}

int rl_rlvr_gen_round(rl_rlvr_gen *g, int64_t step, int64_t round, int64_t prompts,
                      rl_dataproto **out, double *gen_s, double *reward_s)
{
    rl_future *f = NULL;
    int rc = s_round_start(g, step, round, prompts, out, &f);
    if (!rc && (rc = rl_lm_job_rollout_finish(g->j, out, f, gen_s, reward_s))) {
        rl_dataproto_free(*out);
        *out = NULL;
    }
    return rc;
}

/* Round `round` of `step`: taken from the queue when an earlier step sent
 * it off (*ahead = 1), else generated now (trainer.staleness 0, the first
 * step of a run, or a round past those sent ahead). */
static int s_step_round(rl_rlvr_gen *g, int64_t step, int64_t round, rl_dataproto **part,
                        double *gen_s, double *reward_s, int *ahead)
{
    *ahead = g->tc->staleness > 0 && rl_rlvr_async_has(&g->async, step, round);
    if (!*ahead)
        return rl_rlvr_gen_round(g, step, round, g->j->batch, part, gen_s, reward_s);
    return rl_rlvr_async_take(&g->async, g->j, step, round, part, gen_s, reward_s);
}

/* Every round of a job with partial rollouts has per-token versions, and
 * no round of one without has them, so rounds concatenate: a round
 * without them (sampled by the multi-turn loop, which is never
 * interrupted, or restored from a checkpoint of a run without partial
 * rollouts) gets its row's version for each of its tokens (0 past the
 * end); one with them in a job without partial rollouts (a checkpoint of
 * a run with) loses them. */
static int s_match_token_versions(const rl_rlvr_gen *g, rl_dataproto *part)
{
    int has = rl_dataproto_tensor(part, RL_LM_TOKEN_VERSION) != NULL;
    if (!g->partial)
        return has ? rl_dataproto_remove(part, RL_LM_TOKEN_VERSION) : RL_OK;
    if (has)
        return RL_OK;
    int64_t B = rl_dataproto_rows(part);
    const rl_column *c = rl_dataproto_column(part, RL_ROLLOUT_ROW_VERSION);
    const rl_tensor *r = rl_dataproto_tensor(part, RL_LM_RESPONSES);
    const rl_tensor *l = rl_dataproto_tensor_shaped(part, RL_LM_RESPONSE_LENS, RL_I32, 1,
                                                    (int64_t[]){B});
    if (!c || rl_column_get_type(c) != RL_COL_INT64 || !r || r->ndim != 2 || !l)
        return rl_error_set(RL_EPROTO, "a round has no int64 column '%s', %s (B, R) or %s (B)",
                            RL_ROLLOUT_ROW_VERSION, RL_LM_RESPONSES, RL_LM_RESPONSE_LENS);
    int64_t R = r->shape[1];
    rl_tensor *tv = rl_dataproto_new_tensor(part, RL_LM_TOKEN_VERSION, RL_I64, 2, (int64_t[]){B, R});
    if (!tv)
        return rl_error_code();
    int64_t *v = rl_tensor_data(tv);
    const int32_t *len = rl_tensor_data((rl_tensor *)l);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < R; j++)
            v[b * R + j] = j < len[b] ? rl_column_i64(c, b) : 0;
    return RL_OK;
}

/* The first rounds of the next `staleness` steps, sent off once this step's
 * rounds are all back, so the rollout ranks sample them while the actor
 * trains this step. Sent earlier, they would queue ahead of this step's own
 * filter rounds on the rollout (its calls run in order) and the actor would
 * wait for both. They still run before this step's weight sync: at most
 * `staleness` versions old. How many rounds per step: trainer.async_rounds,
 * or (0) as many as this step needed (`used`), at most max_try_make_batch;
 * one without online filtering. Also past trainer.total_steps: a checkpoint
 * of the last step then holds the samples a longer (resumed) run trains on. */
static int s_prefetch_ahead(rl_rlvr_gen *g, int64_t step, int64_t used, rl_metric_set *ms)
{
    int64_t rounds = g->tc->async_rounds ? g->tc->async_rounds : used;
    if (!g->algo->online_filtering || rounds < 1)
        rounds = 1;
    if (rounds > g->algo->max_try_make_batch)
        rounds = g->algo->max_try_make_batch;
    if (rounds > RL_RLVR_MAX_ASYNC_ROUNDS)
        rounds = RL_RLVR_MAX_ASYNC_ROUNDS;
    rl_metric_set_put(ms, "async/rounds_sent_ahead", (double)rounds);
    int rc = RL_OK;
    for (int64_t s = step + 1; !rc && s <= step + g->tc->staleness; s++)
        for (int64_t q = 0; !rc && q < rounds; q++) {
            rl_dataproto *dp = NULL;
            rl_future *f = NULL;
            if (rl_rlvr_async_has(&g->async, s, q))
                continue;
            if (!(rc = s_round_start(g, s, q, g->j->batch, &dp, &f)))
                rc = rl_rlvr_async_push(&g->async, s, q, dp, f);
        }
    return rc;
}

/* Partial rollouts: every sampled token's version (RL_LM_TOKEN_VERSION,
 * from a peer: checked) in [now − S, now] and not older than its row's
 * (`rows`, the oldest of the row); guided rows (their tokens are a worked
 * solution, not samples) are left out. */
static int s_check_token_versions(const rl_rlvr_gen *g, const rl_dataproto *batch,
                                  const rl_column *rows, rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(batch), now = g->j->a.sync.version, S = g->tc->staleness;
    const rl_tensor *resp = rl_dataproto_tensor(batch, RL_LM_RESPONSES);
    const rl_tensor *lt = rl_dataproto_tensor_shaped(batch, RL_LM_RESPONSE_LENS, RL_I32, 1,
                                                     (int64_t[]){B});
    if (!resp || resp->ndim != 2 || !lt)
        return rl_error_set(RL_EPROTO, "the batch has no %s (B, R) and %s (B)", RL_LM_RESPONSES,
                            RL_LM_RESPONSE_LENS);
    int64_t R = resp->shape[1];
    const rl_tensor *tv = rl_dataproto_tensor_shaped(batch, RL_LM_TOKEN_VERSION, RL_I64, 2,
                                                     (int64_t[]){B, R});
    if (!tv)
        return rl_error_wrap(rl_error_code(), "partial rollouts: the batch's per-token versions "
                                              "(%s)", RL_LM_TOKEN_VERSION);
    const rl_column *gc = rl_dataproto_column(batch, RL_LM_GUIDED);
    if (gc && rl_column_get_type(gc) != RL_COL_INT64)
        gc = NULL;
    const int64_t *v = rl_tensor_data((rl_tensor *)tv);
    const int32_t *len = rl_tensor_data((rl_tensor *)lt);
    double tokens = 0, sum = 0, count[RL_RLVR_MAX_STALENESS + 1] = {0};
    int64_t mx = 0, partial = 0;
    for (int64_t b = 0; b < B; b++) {
        if (gc && rl_column_i64(gc, b))
            continue;
        int64_t row = rl_column_i64(rows, b), lo = now, hi = now - S;
        if (len[b] < 0 || len[b] > R)
            return rl_error_set(RL_EPROTO, "row %lld: %s %d outside [0, %lld]", (long long)b,
                                RL_LM_RESPONSE_LENS, len[b], (long long)R);
        for (int64_t j = 0; j < len[b]; j++) {
            int64_t x = v[b * R + j];
            if (x > now || x < now - S || x < row)
                return rl_error_set(RL_ESTATE, "row %lld, token %lld was sampled by weight version "
                                               "%lld, the actor is at version %lld: expected a "
                                               "version in %lld .. %lld (%s %lld) and not older "
                                               "than the row's %lld",
                                    (long long)b, (long long)j, (long long)x, (long long)now,
                                    (long long)(now - S), (long long)now, S_STALENESS,
                                    (long long)S, (long long)row);
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
            sum += (double)(now - x);
            count[now - x]++;
            mx = now - x > mx ? now - x : mx;
        }
        tokens += len[b];
        partial += len[b] > 0 && lo < hi;
    }
    rl_metric_set_put(ms, "async/token_staleness_mean", tokens > 0 ? sum / tokens : 0);
    rl_metric_set_put(ms, "async/token_staleness_max", (double)mx);
    rl_metric_set_put(ms, "async/partial_rows", (double)partial);
    for (int64_t k = 0; k <= S; k++) {
        char name[48];
        snprintf(name, sizeof name, "async/tokens_lag_%lld", (long long)k);
        rl_metric_set_put(ms, name, count[k]);
    }
    return RL_OK;
}

/* Every row's weight version against the actor's: the samples of this
 * step are at most trainer.staleness versions old (0: on-policy). */
static int s_check_versions(const rl_rlvr_gen *g, const rl_dataproto *batch, rl_metric_set *ms)
{
    const rl_column *c = rl_dataproto_column(batch, RL_ROLLOUT_ROW_VERSION);
    if (!c || rl_column_get_type(c) != RL_COL_INT64)
        return rl_error_set(RL_EPROTO, "the batch has no int64 column '%s' (the rollout's weight "
                                       "version per sample)", RL_ROLLOUT_ROW_VERSION);
    int64_t B = rl_dataproto_rows(batch), now = g->j->a.sync.version, mx = 0, S = g->tc->staleness;
    double sum = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t v = rl_column_i64(c, b);
        if (v > now || v < now - S) /* now - v may overflow: v comes from a peer */
            return rl_error_set(RL_ESTATE, "row %lld was sampled by weight version %lld, the actor "
                                           "is at version %lld: expected a version in %lld .. %lld "
                                           "(%s %lld)", (long long)b, (long long)v, (long long)now,
                                (long long)(now - S), (long long)now, S_STALENESS, (long long)S);
        int64_t lag = now - v;
        sum += (double)lag;
        mx = lag > mx ? lag : mx;
    }
    if (S > 0) {
        rl_metric_set_put(ms, "async/staleness_mean", B ? sum / (double)B : 0);
        rl_metric_set_put(ms, "async/staleness_max", (double)mx);
    }
    return g->partial ? s_check_token_versions(g, batch, c, ms) : RL_OK;
}

/* rl_rlvr_shape_fn of the guided rows: the same overlong shaping. */
static int s_shape_guided(void *ctx, rl_dataproto *dp)
{
    return rl_lm_overlong_shape(dp, &rl_lm_batch_names, &((rl_rlvr_gen *)ctx)->overlong, NULL);
}

/* A scored round: overlong shaping, the metrics of what was sampled (the
 * first round), replay's look at the policy's own accuracy, guidance, the
 * filter (*kept: its groups; *rejected: the others, with filter_exhausted
 * fill). */
static int s_shape_round(rl_rlvr_gen *g, int64_t round, rl_dataproto **part, int64_t *kept,
                         rl_dataproto **rejected, rl_metric_set *ms)
{
    rl_metric_set *first = round == 0 ? ms : NULL;
    int rc = rl_lm_overlong_shape(*part, &rl_lm_batch_names, &g->overlong, first);
    if (!rc && first)
        rc = rl_lm_batch_metrics(*part, &rl_lm_batch_names, ms);
    if (!rc)
        rc = rl_rlvr_replay_observe(&g->replay, *part);
    if (!rc)
        rc = rl_rlvr_guidance_apply(g->guide, g->j, part, s_shape_guided, g, NULL, first);
    if (!rc && g->algo->online_filtering)
        rc = rl_lm_filter_groups(part, &rl_lm_batch_names, &g->filter, kept,
                                 g->algo->filter_exhausted ? rejected : NULL);
    return rc;
}

/* Online filtering spent its tries: fill the batch with groups it rejected
 * (filter_exhausted: fill, when there are enough), else an error. */
static int s_out_of_tries(rl_rlvr_gen *g, int64_t step, rl_lm_group_batch *gb, rl_metric_set *ms)
{
    const rl_rlvr_config *a = g->algo;
    int64_t had = gb->groups, filled = 0;
    int rc = a->filter_exhausted ? rl_lm_group_batch_fill(gb, &filled) : RL_OK;
    if (rc || filled) {
        if (!rc) {
            rl_metric_set_put(ms, "batch/filter_filled_groups", (double)filled);
            rl_log_warn("step %lld: online filtering kept %lld of %lld prompt groups in %lld tries; "
                        "the batch is completed with %lld filtered-out groups (%s: fill)",
                        (long long)step, (long long)had, (long long)gb->want,
                        (long long)a->max_try_make_batch, (long long)filled, S_ALGO(filter_exhausted));
        }
        return rc;
    }
    if (a->filter_mode == 1)
        return rl_error_set(RL_ESTATE, "online filtering: only %lld of %lld prompt groups had %s "
                                       "varying within the group after %lld tries (%s)",
                            (long long)had, (long long)gb->want, a->filter_key,
                            (long long)a->max_try_make_batch, S_ALGO(max_try_make_batch));
    return rl_error_set(RL_ESTATE, "online filtering: only %lld of %lld prompt groups had %s mean "
                                   "in (%g, %g) after %lld tries (%s)",
                        (long long)had, (long long)gb->want, a->filter_key, a->filter_low,
                        a->filter_high, (long long)a->max_try_make_batch, S_ALGO(max_try_make_batch));
}

int rl_rlvr_gen_step(rl_rlvr_gen *g, int64_t step, rl_dataproto **batch, rl_metric_set *ms)
{
    rl_lm_group_batch gb = {.want = g->j->batch, .n = g->j->rollout_cfg.n};
    double t_gen = 0, t_rew = 0;
    int64_t rounds_used = 0, rounds_ahead = 0;
    int rc = RL_OK;
    for (int64_t round = 0; !rc && gb.groups < gb.want; round++) {
        if (g->algo->online_filtering && round >= g->algo->max_try_make_batch) {
            rc = s_out_of_tries(g, step, &gb, ms);
            break;
        }
        rl_dataproto *part = NULL, *rejected = NULL;
        double gen_s = 0, reward_s = 0;
        int64_t kept = gb.want;
        int ahead = 0;
        rc = s_step_round(g, step, round, &part, &gen_s, &reward_s, &ahead);
        if (!rc)
            rc = s_match_token_versions(g, part);
        rounds_ahead += ahead;
        rounds_used = round + 1;
        t_gen += gen_s;
        t_rew += reward_s;
        if (!rc)
            rc = s_shape_round(g, round, &part, &kept, &rejected, ms);
        if (!rc) {
            rc = rl_lm_group_batch_add(&gb, part, kept, rejected);
            part = rejected = NULL;
        }
        rl_dataproto_free(part);
        rl_dataproto_free(rejected);
        if (!rc && g->algo->online_filtering)
            rl_metric_set_put(ms, "batch/filter_rounds", (double)(round + 1));
    }
    rl_lm_group_batch_drop_spare(&gb);
    *batch = gb.batch;
    if (g->tc->staleness > 0) { /* rounds sent ahead that this step did not need */
        int unused = rl_rlvr_async_drop_through(&g->async, step);
        rl_metric_set_put(ms, "async/rounds_from_queue", (double)rounds_ahead);
        rl_metric_set_put(ms, "async/unused_rounds", (double)unused);
        if (unused)
            rl_log_debug("step %lld: %d round(s) generated ahead were not needed (dropped)",
                         (long long)step, unused);
    }
    if (!rc && g->tc->staleness > 0) /* before the replay metrics: its draws count in this step's */
        rc = s_prefetch_ahead(g, step, rounds_used, ms);
    rl_rlvr_replay_metrics(&g->replay, ms);
    int64_t guided = rc ? -1 : rl_lm_guided_rows(*batch, &rl_lm_batch_names);
    if (guided >= 0) /* after filtering: what is trained on */
        rl_metric_set_put(ms, "batch/guided_rows", (double)guided);
    rl_metric_set_put(ms, "timing_s/gen", t_gen);
    rl_metric_set_put(ms, "timing_s/reward", t_rew);
    return rc ? rc : s_check_versions(g, *batch, ms);
}

/* The actor publishes version 1 at the start and k + 1 after step k, so the
 * checkpoint of step k holds k + 1: the restored weights are published again
 * under it, and versions (and the staleness of rounds generated ahead)
 * continue exactly. */
static int s_weight_version(rl_rlvr_gen *g, const json_t *extra, int64_t start)
{
    const json_t *wv = json_object_get(extra, "weight_version");
    if (wv && (!json_is_integer(wv) || json_integer_value(wv) < 1 ||
               json_integer_value(wv) > start + 1)) {
        char got[32] = "not an integer";
        if (json_is_integer(wv))
            snprintf(got, sizeof got, "%lld", (long long)json_integer_value(wv));
        return rl_error_set(RL_EPROTO, "checkpoint of step %lld: weight_version: expected 1 .. "
                                       "%lld (version k + 1 is published after step k), got %s",
                            (long long)start, (long long)start + 1, got);
    }
    if (wv && json_integer_value(wv) - 1 > g->j->a.sync.version)
        g->j->a.sync.version = json_integer_value(wv) - 1;
    return RL_OK;
}

int rl_rlvr_gen_save(rl_rlvr_gen *g, json_t *extra)
{
    if (json_object_set_new(extra, "weight_version", json_integer((json_int_t)g->j->a.sync.version)))
        return rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    json_t *queue = g->replay.enable ? rl_rlvr_replay_save(&g->replay) : NULL;
    if (g->replay.enable && (!queue || json_object_set_new(extra, "hard_replay", queue)))
        return rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    if (g->tc->staleness > 0) { /* the rounds already generated for later steps */
        json_t *pending = NULL;
        int rc = rl_rlvr_async_save(&g->async, g->j, &pending);
        if (rc)
            return rc;
        json_object_set_new(extra, "async_pending", pending);
    }
    return RL_OK;
}

int rl_rlvr_gen_restore(rl_rlvr_gen *g, const json_t *extra, int64_t start)
{
    int rc = s_weight_version(g, extra, start);
    int64_t version = g->j->a.sync.version + 1; /* published for step start + 1 */
    const json_t *pending = json_object_get(extra, "async_pending");
    if (rc)
        return rc;
    if (pending && !json_is_object(pending))
        rc = rl_error_set(RL_EPROTO, "checkpoint of step %lld: async_pending is not an object of "
                                     "rounds", (long long)start);
    else if (pending && g->tc->staleness > 0) {
        rl_rlvr_async_expect expect = {start, g->j->batch * g->j->rollout_cfg.n,
                                       g->j->response_length, version};
        int dropped = 0;
        rc = rl_rlvr_async_restore(&g->async, pending, &expect, &dropped);
        if (!rc && dropped)
            rl_log_warn("checkpoint of step %lld: %d round(s) generated ahead do not fit this "
                        "job (%s lowered, or the batch or response length changed): they are "
                        "dropped and generated again", (long long)start, dropped, S_STALENESS);
    } else if (pending && json_object_size(pending) > 0)
        rl_log_warn("the checkpoint holds samples generated ahead (%s > 0); %s is 0 now: they "
                    "are dropped", S_STALENESS, S_STALENESS);
    const json_t *queue = json_object_get(extra, "hard_replay");
    if (!rc && g->replay.enable && queue)
        rc = rl_rlvr_replay_restore(&g->replay, queue);
    else if (!rc && g->replay.enable)
        rl_log_warn("the checkpoint has no hard_replay queue: the queue starts empty");
    return rc;
}
