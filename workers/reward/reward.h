/* workers/reward/reward.h — contract of the reward role (workers/reward/):
 * its methods, the columns and tensors each takes and returns, and its
 * config section. The recipe and the worker both use these names; the
 * strings appear nowhere else.
 *
 * Config (read and range-checked once, at CONFIGURE; RL_REWARD_DEFAULTS is
 * the one place the defaults live):
 *   reward.format_weight            [0, 1]  score = (1 − w)·accuracy + w·format + extra
 *   reward.last_number_fallback     gsm8k: the last number when no "#### n"/\boxed{}
 *   reward.math_last_number_fallback  the same for the math verifiers
 *   reward.default_data_source      verifier for an unknown data_source (null: an error)
 *
 * compute_reward (dispatch dp_compute; rows keep their order)
 *   in   columns RL_REWARD_RESPONSE, RL_REWARD_GROUND_TRUTH, RL_REWARD_DATA_SOURCE
 *        (string, B rows); optional tensor RL_REWARD_EXTRA (B) f32 added to the
 *        score (e.g. the AEPO entropy reward); no meta
 *   out  tensors RL_REWARD_SCORE, RL_REWARD_ACCURACY, RL_REWARD_FORMAT (B) f32
 *
 * Image rewards (the diffusion track, seed 004): served when the job has
 * the reward section of RL_REWARD_IMAGE_DEFAULTS (the diffusion recipes add
 * it; an LM job does not have it and compute_reward is unchanged).
 *   reward.reward_model   "name[:weight],…" of jpeg_compressibility,
 *                         jpeg_incompressibility, prompt_match, remote, on_prompt
 *                         (1 when the scorer's argmax is the prompt's class)
 *                         (rl_image_reward_parse; the seed's key)
 *   reward.reward_coeff   [0, 1e6]  score = reward_coeff · Σ weight·reward (seed: 0.1)
 *   reward.jpeg_quality   [1, 100]  DDPO's 95
 *   reward.scorer_path    a saved image_classifier ('' = none; prompt_match and
 *                         on_prompt need it), or up to RL_REWARD_MAX_SCORERS
 *                         of them separated by commas: an ensemble whose
 *                         class probabilities are averaged;
 *                         when set, every call also reports on_prompt
 *   reward.judge_path     a second saved image_classifier ('' = none), trained
 *                         apart from the scorer (another seed and size): its
 *                         argmax is reported as judge_on_prompt and never
 *                         enters the score — an on-prompt check that the
 *                         policy does not train against
 *   reward.remote.{endpoint, timeout_ms >= 1, retries [0, 100], image_format png|raw}
 *                         the remote scorer (proto/scorer.proto); remote needs an endpoint
 * compute_image_reward (dispatch dp_compute; rows keep their order)
 *   in   tensor RL_REWARD_IMAGES (B, C, H, W) f32 in [−1, 1] (the first frame,
 *        finite), column RL_REWARD_PROMPT (string); no meta
 *   out  tensors RL_REWARD_SCORE (B) f32 and, per configured reward, its raw
 *        value (B) f32: RL_REWARD_JPEG_KB (kB of the JPEG; compressibility is
 *        −kB), RL_REWARD_PROMPT_MATCH (p(class | image)), RL_REWARD_REMOTE;
 *        with a scorer, RL_REWARD_ON_PROMPT (B) f32 1/0: the classifier's
 *        argmax is the prompt's class; with a judge, RL_REWARD_JUDGE_ON_PROMPT
 *        (B) f32 1/0: the same for the judge
 */
#ifndef RLRT_ROLES_REWARD_H
#define RLRT_ROLES_REWARD_H

#include <stddef.h>

#include "rlrt/config.h"
#include "common/data/data.h"
#include "rlrt/error.h"
#include "common/image/image.h"
#include "common/reward/image_reward.h"
#include "common/reward/reward.h"

#define RL_REWARD_ROLE "reward"

#define RL_REWARD_COMPUTE "compute_reward"

#define RL_REWARD_RESPONSE "response"                 /* decoded response text */
#define RL_REWARD_GROUND_TRUTH RL_DATA_GROUND_TRUTH
#define RL_REWARD_DATA_SOURCE RL_DATA_SOURCE
#define RL_REWARD_EXTRA "extra_reward"
#define RL_REWARD_SCORE "score"
#define RL_REWARD_ACCURACY "accuracy"
#define RL_REWARD_FORMAT "format"

#define RL_REWARD_IMAGE_COMPUTE "compute_image_reward"
#define RL_REWARD_IMAGES "images"
#define RL_REWARD_PROMPT "prompt"
#define RL_REWARD_JPEG_KB "jpeg_kb"
#define RL_REWARD_PROMPT_MATCH "prompt_match"
#define RL_REWARD_REMOTE "remote_score"
#define RL_REWARD_ON_PROMPT "on_prompt"
#define RL_REWARD_JUDGE_ON_PROMPT "judge_on_prompt"
#define RL_REWARD_MAX_SCORERS 8

#define RL_REWARD_DEFAULTS \
    "reward:\n" \
    "  format_weight: 0.1\n" \
    "  last_number_fallback: true\n" \
    "  math_last_number_fallback: false\n" \
    "  default_data_source: ~\n"

/* The reward's settings (read by the worker at CONFIGURE and checked by the
 * driver before it starts any process, with the same table). */
typedef struct rl_reward_role_config {
    double format_weight;
    int last_number_fallback, math_last_number_fallback;
    const char *default_source; /* borrowed; NULL = none */
} rl_reward_role_config;

static inline int rl_reward_role_config_read(const rl_config *c, rl_reward_role_config *o)
{
    static const rl_config_spec spec[] = {
        {"reward.format_weight", RL_CFG_NUM, offsetof(rl_reward_role_config, format_weight), 0, 1,
         0, NULL},
        {"reward.last_number_fallback", RL_CFG_BOOL,
         offsetof(rl_reward_role_config, last_number_fallback), 0, 0, 0, NULL},
        {"reward.math_last_number_fallback", RL_CFG_BOOL,
         offsetof(rl_reward_role_config, math_last_number_fallback), 0, 0, 0, NULL},
        {"reward.default_data_source", RL_CFG_STR, offsetof(rl_reward_role_config, default_source),
         0, 0, 0, NULL},
    };
    int rc = rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
    rl_verifier v;
    if (!rc && o->default_source && rl_reward_verifier_for(NULL, o->default_source, &v))
        rc = rl_config_error_at(c, "reward.default_data_source", RL_ECONFIG, "%s",
                                rl_error_message());
    return rc;
}

#define RL_REWARD_IMAGE_DEFAULTS \
    "reward:\n" \
    "  reward_model: prompt_match   # name[:weight],... of jpeg_compressibility,\n" \
    "                               # jpeg_incompressibility, prompt_match, remote,\n" \
    "                               # on_prompt\n" \
    "  reward_coeff: 0.1            # score = reward_coeff * sum(weight * reward)\n" \
    "  jpeg_quality: 95\n" \
    "  scorer_path: runs/fmnist_scorer/final   # the learned prompt-match scorer (a,b,...: ensemble)\n" \
    "  judge_path: ''               # a second classifier, trained apart: judge_on_prompt\n" \
    "  remote:                      # a remote scorer (proto/scorer.proto), e.g. HPSv3\n" \
    "    endpoint: ''\n" \
    "    timeout_ms: 30000\n" \
    "    retries: 2\n" \
    "    image_format: png          # png or raw\n"

typedef struct rl_reward_image_config {
    const char *reward_model, *scorer_path, *judge_path, *endpoint; /* borrowed */
    double coeff;
    int64_t quality, timeout_ms, retries;
    int raw; /* image_format: 0 png, 1 raw */
    double weight[RL_IMG_REWARD_COUNT];
} rl_reward_image_config;

static inline int rl_reward_image_config_read(const rl_config *c, rl_reward_image_config *o)
{
#define RL_W_OFF(f) offsetof(rl_reward_image_config, f)
    static const rl_config_spec spec[] = {
        {"reward.reward_model", RL_CFG_STR, RL_W_OFF(reward_model), 0, 0, RL_CFG_NONEMPTY, NULL},
        {"reward.reward_coeff", RL_CFG_NUM, RL_W_OFF(coeff), 0, 1e6, 0, NULL},
        {"reward.jpeg_quality", RL_CFG_INT, RL_W_OFF(quality), 1, 100, 0, NULL},
        {"reward.scorer_path", RL_CFG_STR, RL_W_OFF(scorer_path), 0, 0, 0, NULL},
        {"reward.judge_path", RL_CFG_STR, RL_W_OFF(judge_path), 0, 0, 0, NULL},
        {"reward.remote.endpoint", RL_CFG_STR, RL_W_OFF(endpoint), 0, 0, 0, NULL},
        {"reward.remote.timeout_ms", RL_CFG_INT, RL_W_OFF(timeout_ms), 1, 86400000, 0, NULL},
        {"reward.remote.retries", RL_CFG_INT, RL_W_OFF(retries), 0, 100, 0, NULL},
        {"reward.remote.image_format", RL_CFG_ENUM, RL_W_OFF(raw), 0, 0, 0, "png|raw"},
    };
#undef RL_W_OFF
    int rc = rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
    if (!rc && rl_image_reward_parse(o->reward_model, o->weight))
        rc = rl_config_error_at(c, "reward.reward_model", RL_ECONFIG, "%s", rl_error_message());
    static const rl_image_reward_kind scored[2] = {RL_IMG_PROMPT_MATCH, RL_IMG_ON_PROMPT};
    for (int i = 0; !rc && i < 2; i++)
        if (o->weight[scored[i]] != 0 && !(o->scorer_path && *o->scorer_path))
            rc = rl_config_error_at(c, "reward.scorer_path", RL_ECONFIG,
                                    "%s needs the learned scorer's directory",
                                    rl_image_reward_name(scored[i]));
    if (!rc && o->weight[RL_IMG_REMOTE] != 0 && !(o->endpoint && *o->endpoint))
        rc = rl_config_error_at(c, "reward.remote.endpoint", RL_ECONFIG,
                                "the remote reward needs the scorer server's endpoint");
    return rc;
}

#endif
