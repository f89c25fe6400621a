/* test_embodied.c — the embodied recipe's pure pieces (common/algo/flow/embodied.h,
 * common/batch/episodes.h) on hand-computed inputs, and the algorithm.*
 * section of the flow RL methods (common/schema/flow_rl.h,
 * common/batch/flow_rl.h): EMA schedules, the loss-type switch, the
 * estimator through the estimator table and located errors for bad values;
 * libero_rl's evaluation picks the first initial states of every task
 * whatever env.group_size; a missing demonstrations file is named by the
 * key that names it; the env steps of a round (libero_rl's
 * rollout/env_steps) are the sum of its episodes' lengths. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/algo/flow/embodied.h"
#include "rlrt/error.h"
#include "rlrt/config.h"
#include "common/algo/flow/flow.h"
#include "common/batch/episodes.h"
#include "common/batch/estimators.h"
#include "common/schema/env.h"
#include "common/schema/flow_rl.h"
#include "common/schema/trainer.h"
#include "driver/recipes/embodied/flow_demos.h"
#include "workers/actor/actor.h"
#include "workers/flow_rl.h"
#include "workers/rollout/rollout.h"

static void test_chunk_arrays(void **state)
{
    (void)state;
    /* B = 2 episodes, S = 2 chunks of C = 3: episode 1 ends after 4 actions */
    const float rewards[12] = {0, 0, 0, 0, 0, 1, /* ep 0 */ 0, 0, 0, 1, 9, 9 /* ep 1, 9s not valid */};
    const uint8_t valid[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    float sr[12], cr[4], m[4];
    rl_embodied_chunk_arrays(rewards, valid, 2, 2, 3, sr, cr, m);
    const float want_sr[12] = {0, 0, 0, /* s0 b1 */ 0, 0, 0, /* s1 b0 */ 0, 0, 1, /* s1 b1 */ 1, 0, 0};
    for (int i = 0; i < 12; i++)
        assert_true(sr[i] == want_sr[i]);
    const float want_cr[4] = {0, 0, 1, 1}, want_m[4] = {1, 1, 1, 1};
    for (int i = 0; i < 4; i++) {
        assert_true(cr[i] == want_cr[i]);
        assert_true(m[i] == want_m[i]);
    }
    /* a chunk whose first action was not taken is masked */
    const uint8_t valid2[12] = {1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1};
    rl_embodied_chunk_arrays(rewards, valid2, 2, 2, 3, NULL, cr, m);
    assert_true(m[0] == 1 && m[1] == 1 && m[2] == 0 && m[3] == 1);
    assert_true(cr[2] == 0);
}

/* libero_rl's rollout/env_steps: the sum of the episodes' lengths (their valid steps) */
static void test_envs_steps(void **state)
{
    (void)state;
    uint8_t valid[12] = {1, 1, 1, 1, 1, 1, /* env 0: all 6 */ 1, 1, 1, 1, 0, 0 /* env 1: ends after 4 */};
    rl_episode_envs e = {.B = 2, .K = 6, .valid = valid};
    assert_int_equal(rl_episode_envs_steps(&e), 10);
    valid[6] = 0, valid[7] = 0, valid[8] = 0, valid[9] = 0; /* an env that did not step */
    assert_int_equal(rl_episode_envs_steps(&e), 6);
    rl_episode_envs none = {0};
    assert_int_equal(rl_episode_envs_steps(&none), 0);
}

static void test_grpo_advantages(void **state)
{
    (void)state;
    const float R[7] = {1, 0, 1, 0, 1, 1, 1};
    const int64_t g[7] = {0, 0, 0, 0, 2, 2, 2};
    float adv[7];
    int64_t kept = -1;
    assert_int_equal(rl_embodied_grpo_advantages(R, g, 7, 3, 1, 0.1, 0.9, adv, &kept), 0);
    /* group 0: mean 0.5, unbiased std sqrt(1/3); group 2: mean 1 > 0.9, filtered */
    double a = 0.5 / (sqrt(1.0 / 3.0) + 1e-6);
    assert_true(fabs(adv[0] - a) < 1e-6 && fabs(adv[1] + a) < 1e-6);
    assert_true(fabs(adv[2] - a) < 1e-6 && fabs(adv[3] + a) < 1e-6);
    assert_true(adv[4] == 0 && adv[5] == 0 && adv[6] == 0);
    assert_int_equal(kept, 1);
    /* no filter: group 2 kept, zero spread gives A = 0 */
    assert_int_equal(rl_embodied_grpo_advantages(R, g, 7, 3, 0, 0.1, 0.9, adv, &kept), 0);
    assert_int_equal(kept, 2);
    assert_true(adv[4] == 0);
    const int64_t bad[2] = {0, 5};
    assert_int_equal(rl_embodied_grpo_advantages(R, bad, 2, 3, 0, 0, 1, adv, NULL), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "group[1] = 5"));
}

static void test_seq_mean_scale(void **state)
{
    (void)state;
    /* episode 0 has 3 rows (a failure that ran long), episode 2 has 1 (an
     * early success), episode 1 none: E = 2, n = 4 */
    const int64_t ep[4] = {0, 2, 0, 0};
    float adv[4] = {-1, 1, -1, -1};
    assert_int_equal(rl_embodied_seq_mean_scale(ep, 4, 3, adv), 0);
    /* (n / E) / L: 2/3 for episode 0's rows, 2 for episode 2's */
    assert_true(fabs(adv[0] + 2.0 / 3.0) < 1e-6 && fabs(adv[2] + 2.0 / 3.0) < 1e-6);
    assert_true(fabs(adv[1] - 2.0) < 1e-6);
    /* the row mean is the mean of the episodes' means: (-1 + 1) / 2 = 0,
     * where the unweighted row mean was -0.5 */
    assert_true(fabs((adv[0] + adv[1] + adv[2] + adv[3]) / 4.0) < 1e-6);
    /* a batch of equal-length episodes is left as it is */
    const int64_t eq[4] = {1, 0, 1, 0};
    float same[4] = {0.5f, -2, 0.5f, -2};
    assert_int_equal(rl_embodied_seq_mean_scale(eq, 4, 2, same), 0);
    assert_true(same[0] == 0.5f && same[1] == -2 && same[2] == 0.5f && same[3] == -2);
    const int64_t bad[2] = {0, 3};
    float keep[2] = {1, 1};
    assert_int_equal(rl_embodied_seq_mean_scale(bad, 2, 3, keep), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "episode[1] = 3"));
    assert_true(keep[0] == 1 && keep[1] == 1);
}

/* The known keys of a libero_rl-like job: the trainer's, the env's and the
 * flow RL methods' sections, the actor's and the rollout's keys. */
static rl_config *s_known(void)
{
    const rl_config_section *secs[] = {&rl_trainer_section,  &rl_env_section,
                                       &rl_flow_rl_section,  &rl_actor_section,
                                       &rl_estimator_section, &rl_discount_section,
                                       &rl_rollout_section, &rl_rollout_flow_section};
    rl_config *k = rl_config_schema_defaults(secs, sizeof secs / sizeof secs[0], NULL, 0);
    assert_non_null(k);
    return k;
}

static rl_config *s_job_over(const char *yaml, int n, const char *const *ov)
{
    char path[] = "/tmp/rl_test_embodied_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(yaml, f);
    fclose(f);
    rl_config *k = s_known();
    rl_config *c = rl_config_load_job_tree(k, path, n, ov);
    rl_config_free(k);
    remove(path);
    return c;
}

static rl_config *s_job(const char *yaml) { return s_job_over(yaml, 0, NULL); }

/* The section of job c with its estimator checked (NULL + message). */
static const rl_flow_rl_config *s_alg(const rl_config *c)
{
    const rl_flow_rl_config *o = rl_config_section_get(c, &rl_flow_rl_section);
    return o && rl_flow_rl_estimator(c, o) ? o : NULL;
}

static void test_ema_schedules(void **state)
{
    (void)state;
    rl_config *c = s_job("algorithm:\n  loss_type: flow_sar\n");
    assert_non_null(c);
    const rl_flow_rl_config *o = s_alg(c);
    assert_non_null(o);
    assert_int_equal(o->loss, RL_FLOW_LOSS_SAR);
    assert_int_equal(o->sar_credit, 0); /* seed 000's softmax credit by default */
    assert_false(o->sar_balance);       /* and its weights as they are (no label balance) */
    assert_true(o->sar_neg_coef == 1.0); /* and the failed episodes' weights unscaled */
    /* seed 000 default: linear, β_i = min(0.001·i, 0.5) */
    assert_true(rl_flow_rl_ema_beta(o, 0) == 0.0);
    assert_true(fabs(rl_flow_rl_ema_beta(o, 10) - 0.01) < 1e-12);
    assert_true(rl_flow_rl_ema_beta(o, 5000) == 0.5);
    rl_config_free(c);
    c = s_job("algorithm:\n  loss_type: flow_sar\n  flow_sar_ema_schedule: fixed\n  flow_sar_ema_beta: 0.9\n"
              "  flow_sar_credit: success\n  flow_sar_negative_coef: 0\n");
    assert_non_null(o = s_alg(c));
    assert_true(o->sar_neg_coef == 0.0);
    assert_int_equal(o->sar_credit, 1); /* self-imitation on the successes */
    assert_false(o->sar_balance);
    assert_true(rl_flow_rl_ema_beta(o, 0) == 0.9 && rl_flow_rl_ema_beta(o, 77) == 0.9);
    rl_config_free(c);
    /* a negative share of the failures would pull toward them: refused at its line */
    c = s_job("algorithm:\n  loss_type: flow_sar\n  flow_sar_negative_coef: -1\n");
    assert_null(rl_config_section_get(c, &rl_flow_rl_section));
    assert_non_null(strstr(rl_error_message(), ":3:"));
    assert_non_null(strstr(rl_error_message(), "algorithm.flow_sar_negative_coef"));
    rl_config_free(c);
    c = s_job("algorithm:\n  loss_type: flow_ipo\n");
    assert_non_null(o = s_alg(c));
    assert_true(rl_flow_rl_ema_beta(o, 3) == 0.995); /* seed 001: beta_ref */
    rl_config_free(c);
    /* the EMA update of the rollout: ref <- beta ref + (1 - beta) cur */
    float ref[2] = {1, 2};
    const float cur[2] = {3, 4};
    assert_int_equal(rl_flow_ema_update(ref, cur, 2, 0.25), 0);
    assert_true(fabs(ref[0] - 2.5) < 1e-6 && fabs(ref[1] - 3.5) < 1e-6);
}

/* The trained action chunk is the one the env executed: clipped to [-1, 1]
 * (the warm start's own samples reach |a| ~ 30; training on the raw ones
 * targets actions the env never ran). */
static void test_clip_actions(void **state)
{
    (void)state;
    float a[6] = {-30.5f, -1.0f, 0.25f, 1.0f, 1.5f, NAN};
    assert_int_equal(rl_flow_clip_actions(a, 6, -1.0f, 1.0f), 2);
    assert_true(a[0] == -1.0f && a[1] == -1.0f && a[2] == 0.25f && a[3] == 1.0f && a[4] == 1.0f);
    assert_true(isnan(a[5]));
    assert_int_equal(rl_flow_clip_actions(NULL, 3, -1.0f, 1.0f), 0);
}

static void test_switch_and_errors(void **state)
{
    (void)state;
    const rl_flow_rl_config *o;
    rl_config *c = s_job("algorithm:\n  loss_type: actor_critic\n  adv_estimator: gae\n");
    assert_non_null(o = s_alg(c));
    assert_int_equal(o->loss, RL_FLOW_LOSS_PPO);
    assert_int_equal(o->normalize_adv, 1); /* RLinf's normalize_advantages */
    assert_int_equal(rl_flow_rl_estimator(c, o)->id, RL_EST_GAE);
    const rl_actor_config *ac;
    assert_non_null(ac = rl_config_section_get(c, &rl_actor_section));
    assert_true(ac->value_lr == 0.0); /* the value head on the policy's lr by default */
    rl_config_free(c);
    c = s_job("algorithm:\n  loss_type: actor_critic\n  adv_estimator: gae\n  normalize_advantages: false\n"
              "actor:\n  optim: {lr: 1.0e-5, value_lr: 1.0e-4}\n");
    assert_non_null(o = s_alg(c));
    assert_int_equal(o->normalize_adv, 0);
    assert_non_null(ac = rl_config_section_get(c, &rl_actor_section));
    assert_true(ac->value_lr == 1.0e-4);
    rl_config_free(c);
    /* a value lr is a multiple of the policy's: lr 0 cannot carry it */
    c = s_job("actor:\n  optim:\n    lr: 0\n    value_lr: 1.0e-4\n");
    assert_null(rl_config_section_get(c, &rl_actor_section));
    assert_non_null(strstr(rl_error_message(), ":4:"));
    assert_non_null(strstr(rl_error_message(), "actor.optim.value_lr"));
    rl_config_free(c);
    c = s_job("algorithm:\n  loss_type: actor\n");
    assert_non_null(o = s_alg(c));
    assert_int_equal(o->loss, RL_FLOW_LOSS_GRPO);
    assert_int_equal(o->seq_mean, 0); /* token-mean by default */
    assert_int_equal(o->train_ode, 0);
    assert_int_equal(rl_flow_rl_estimator(c, o)->id, RL_EST_GRPO);
    rl_config_free(c);
    c = s_job("algorithm:\n  loss_type: actor\nactor:\n  loss_agg_mode: seq-mean-token-mean\n");
    assert_non_null(o = s_alg(c));
    assert_int_equal(o->seq_mean, 1);
    rl_config_free(c);
    c = s_job("algorithm:\n  loss_type: flow_ipo\nrollout:\n  noise_level: 0\n");
    assert_non_null(o = s_alg(c));
    assert_int_equal(o->train_ode, 1); /* FlowIPO's ODE rollouts */
    rl_config_free(c);
    static const struct {
        const char *yaml, *loc, *want; /* the job file's line, the message */
    } bad[] = {
        {"algorithm:\n  loss_type: flow_nft\n", ":2:", "algorithm.loss_type: expected flow_sar, flow_ipo"},
        {"algorithm:\n  loss_type: actor\n  adv_estimator: gae\n", ":3:", "algorithm.adv_estimator: loss_type actor"},
        {"algorithm:\n  loss_type: actor_critic\n", ":2:", "algorithm.loss_type: loss_type actor_critic trains"},
        {"algorithm:\n  flow_sar_temperature: 0\n", ":2:", "algorithm.flow_sar_temperature: must be in (0, 1000000], got 0"},
        {"algorithm:\n  flow_sar_ema_schedule: cosine\n", ":2:", "algorithm.flow_sar_ema_schedule"},
        {"algorithm:\n  flow_ipo_t_min: 0.9\n", ":2:", "algorithm.flow_ipo_t_min: algorithm.flow_ipo_t_min (0.9) is above algorithm.flow_ipo_t_max (0.8)"},
        {"algorithm:\n  flow_sar_energy_type: sde\n  flow_sar_t_min: 0\n", ":3:", "the sde energy (algorithm.flow_sar_energy_type) divides by 2t"},
        {"algorithm:\n  loss_type: actor\nactor:\n  loss_agg_mode: seq-mean-token-sum\n", ":4:", "actor.loss_agg_mode"},
        {"actor:\n  loss_agg_mode: seq-mean-token-mean\n", ":2:", "flow_sar weighs its chunks by its own credit"},
        {"algorithm:\n  normalize_advantages: maybe\n", ":2:", "algorithm.normalize_advantages"},
        {"algorithm:\n  rl_coef: 0\n", ":2:", "algorithm.rl_coef: algorithm.rl_coef 0 with algorithm.demo_coef 0 trains nothing"},
        {"algorithm:\n  demo_coef: 0.5\n", ":2:", "algorithm.demo_coef: algorithm.demo_coef is 0.5: name the demonstrations in algorithm.demos"},
        {"algorithm:\n  loss_type: actor\nrollout:\n  noise_level: 0\n", ":4:",
         "rollout.noise_level: flow-SDE GRPO (algorithm.loss_type actor) scores the flow SDE's log-probs"},
        {"algorithm:\n  adv_estimator: gea\n", ":2:", "algorithm.adv_estimator: unknown value 'gea'"},
        /* a name of the table the embodied track cannot use */
        {"algorithm:\n  adv_estimator: rloo\n", ":2:", "estimator 'rloo' is not available to the embodied"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = s_job(bad[i].yaml); /* a value of the wrong type fails at load, the others here */
        assert_true(!c || !s_alg(c));
        if (!strstr(rl_error_message(), bad[i].want) || !strstr(rl_error_message(), bad[i].loc))
            fail_msg("case %zu: '%s' does not contain '%s' and '%s'", i, rl_error_message(), bad[i].loc,
                     bad[i].want);
        rl_config_free(c);
    }
}

/* An env layout: total envs, groups of G, tasks '0-<n-1>'. */
static const rl_env_config *s_env(rl_config **c, int total, int G, int n)
{
    char ov[3][64];
    snprintf(ov[0], sizeof ov[0], "env.total_num_envs=%d", total);
    snprintf(ov[1], sizeof ov[1], "env.group_size=%d", G);
    snprintf(ov[2], sizeof ov[2], "env.task_ids=0-%d", n - 1);
    const char *const o[3] = {ov[0], ov[1], ov[2]};
    *c = s_job_over("trainer:\n  seed: 1\n", 3, o);
    assert_non_null(*c);
    const rl_env_config *e = rl_config_section_get(*c, &rl_env_section);
    if (!e)
        fail_msg("%s", rl_error_message());
    return e;
}

/* libero_rl's evaluation: ungrouped rounds of every env, and of them the
 * episodes from the first per_task initial states of each task, once each.
 * With env.group_size 4 the envs of task 0 are 0-3 (not every other env):
 * the first two of each task are envs 0, 1 and 4, 5. */
static void test_eval_picks(void **state)
{
    (void)state;
    static const struct {
        int total, G, n, per;
    } cases[] = {{8, 4, 2, 2}, {8, 4, 2, 4}, {8, 1, 2, 2}, {12, 1, 10, 2}, {40, 4, 10, 10}, {5, 1, 5, 3},
                 {16, 2, 2, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl_config *c;
        const rl_env_config *env = s_env(&c, cases[i].total, cases[i].G, cases[i].n);
        rl_episode_envs e = {0};
        e.B = env->total_num_envs;
        int64_t task[64];
        uint8_t success[64];
        e.task = task;
        e.success = success;
        int seen[64][64] = {{0}};
        rl_episode_tally t;
        memset(&t, 0, sizeof t);
        const int64_t rounds = rl_episode_eval_rounds(env, cases[i].per);
        for (int64_t r = 0; r < rounds; r++) {
            for (int64_t g = 0; g < e.B; g++) {
                rl_env_place p = rl_env_place_of(env, g, 1);
                task[g] = p.task;
                success[g] = p.task == 1; /* task 1 succeeds, the others fail */
                int64_t init = p.k + r * p.sharing;
                if (init < cases[i].per)
                    seen[p.task][init]++;
            }
            rl_episode_tally_round(&t, &e, env, r, cases[i].per);
        }
        for (int k = 0; k < cases[i].n; k++) {
            if (t.n[k] != cases[i].per)
                fail_msg("case %zu: task %d evaluated %lld times, want %d", i, k, (long long)t.n[k], cases[i].per);
            for (int s = 0; s < cases[i].per; s++)
                if (seen[k][s] != 1)
                    fail_msg("case %zu: task %d initial state %d run %d times", i, k, s, seen[k][s]);
        }
        assert_int_equal(t.ok[1], cases[i].per);
        assert_int_equal(t.all, cases[i].per * cases[i].n);
        rl_config_free(c);
    }
    /* the picks of the first case: envs 0, 1 (task 0) and 4, 5 (task 1) */
    rl_config *c;
    const rl_env_config *env = s_env(&c, 8, 4, 2);
    int64_t task[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    uint8_t success[8] = {1, 1, 0, 0, 1, 1, 0, 0};
    rl_episode_envs e = {.B = 8, .task = task, .success = success};
    rl_episode_tally t;
    memset(&t, 0, sizeof t);
    rl_episode_tally_round(&t, &e, env, 0, 2);
    assert_true(t.n[0] == 2 && t.ok[0] == 2 && t.n[1] == 2 && t.ok[1] == 2);
    rl_config_free(c);
}

/* A demonstrations file that is not there: the key that names it, and how
 * to make one. */
static void test_demos_missing(void **state)
{
    (void)state;
    rl_config *c = s_job("algorithm:\n  demo_coef: 1.0\n  demos: /nonexistent/demos.safetensors\n");
    assert_non_null(c);
    const rl_flow_rl_config *o = s_alg(c);
    assert_non_null(o);
    rl_flow_demos p;
    assert_int_not_equal(rl_flow_demos_open(c, &rl_flow_rl_section, offsetof(rl_flow_rl_config, demos), o->demos,
                                            o->demos_per_task, 5, 10, &p), 0);
    const char *m = rl_error_message();
    if (!strstr(m, ":3:") || !strstr(m, "algorithm.demos: ") || !strstr(m, "/nonexistent/demos.safetensors") ||
        !strstr(m, "collect them with examples/libero_collect.yaml") || strstr(m, "warmstart.demos"))
        fail_msg("'%s'", m);
    /* without a job: the file and the hint, no key */
    assert_int_not_equal(rl_flow_demos_load("/nonexistent/demos.safetensors", 10, 5, 10, &p), 0);
    assert_null(strstr(rl_error_message(), "warmstart.demos"));
    assert_non_null(strstr(rl_error_message(), "collect them with"));
    rl_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_arrays),
        cmocka_unit_test(test_envs_steps),
        cmocka_unit_test(test_grpo_advantages),
        cmocka_unit_test(test_seq_mean_scale),
        cmocka_unit_test(test_ema_schedules),
        cmocka_unit_test(test_clip_actions),
        cmocka_unit_test(test_switch_and_errors),
        cmocka_unit_test(test_eval_picks),
        cmocka_unit_test(test_demos_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
