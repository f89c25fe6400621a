/* common/schema/reward_image.h — the reward role's section for image
 * rewards (the diffusion track, seed 004): which rewards and their weights,
 * the learned scorer and judge, a remote scorer (proto/scorer.proto). The
 * reward library parses reward.reward_model and checks what each reward
 * needs (rl_image_reward_weights_from_job, common/reward/reward_config.h).
 * Optional: the reward role serves compute_image_reward only in a job that
 * has it. */
#ifndef RLRT_SCHEMA_REWARD_IMAGE_H
#define RLRT_SCHEMA_REWARD_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_REWARD_IMAGE_KEYS(X)                                                                     \
    X(STR, reward_model, "reward.reward_model", "prompt_match", 0, 0, RL_CFG_NONEMPTY, NULL,        \
      "name[:weight],... of jpeg_compressibility, jpeg_incompressibility, prompt_match, remote, "   \
      "on_prompt (1 when the scorer's argmax is the prompt's class)")                               \
    X(NUM, coeff, "reward.reward_coeff", "0.1", 0, 1e6, 0, NULL,                                    \
      "score = reward_coeff x sum(weight x reward)")                                                \
    X(INT, quality, "reward.jpeg_quality", "95", 1, 100, 0, NULL, "the JPEG rewards' quality")      \
    X(STR, scorer_path, "reward.scorer_path", "runs/fmnist_scorer/final", 0, 0, 0, NULL,            \
      "a saved image_classifier, the learned prompt-match scorer (a,b,...: an ensemble; '': none)") \
    X(STR, judge_path, "reward.judge_path", "''", 0, 0, 0, NULL,                                    \
      "a second classifier trained apart, reported as judge_on_prompt and never scored ('': none)") \
    X(STR, endpoint, "reward.remote.endpoint", "''", 0, 0, 0, NULL,                                 \
      "the remote scorer's endpoint (e.g. HPSv3; the remote reward needs it)")                      \
    X(INT, timeout_ms, "reward.remote.timeout_ms", "30000", 1, 86400000, 0, NULL,                   \
      "per remote call")                                                                            \
    X(INT, retries, "reward.remote.retries", "2", 0, 100, 0, NULL, "retries of a failed remote call") \
    X(ENUM, raw, "reward.remote.image_format", "png", 0, 0, 0, "png|raw",                           \
      "how the images travel to the remote scorer")

typedef struct rl_reward_image_config {
    RL_REWARD_IMAGE_KEYS(RL_CFG_FIELD)
} rl_reward_image_config;

extern const rl_config_section rl_reward_image_section;

#endif
