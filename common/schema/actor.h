/* common/schema/actor.h — the actor role's section: the optimiser, the PPO
 * loss settings, FSDP's communication timeout, the batch sizes of an
 * optimiser step (the recipes read actor.ppo_* too). Read once per tree
 * (rl_config_section_get) by the actor ranks at CONFIGURE and by the
 * driver before any process starts.
 *
 * The three ENUM keys carry their text beside the index (the derived
 * *_name fields, borrowed from the tree): the actor turns them into the
 * optimiser's, the loss's and the KL's own enums (rl_lr_kind_parse,
 * rl_loss_agg_parse, rl_kl_kind_parse accept every choice listed here). */
#ifndef RLRT_SCHEMA_ACTOR_H
#define RLRT_SCHEMA_ACTOR_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_ACTOR_KEYS(X)                                                                            \
    X(NUM, lr, "actor.optim.lr", "1.0e-4", 0, 10, 0, NULL, "AdamW's learning rate (the peak of a schedule)") \
    X(NUM, weight_decay, "actor.optim.weight_decay", "0.0", 0, 10, 0, NULL,                         \
      "AdamW's decoupled weight decay (1-d parameters: none)")                                      \
    X(NUM, beta1, "actor.optim.beta1", "0.9", 0, 1, RL_CFG_MAX_OPEN, NULL, "AdamW's first-moment decay") \
    X(NUM, beta2, "actor.optim.beta2", "0.999", 0, 1, RL_CFG_MAX_OPEN, NULL,                        \
      "AdamW's second-moment decay")                                                                \
    X(NUM, eps, "actor.optim.eps", "1.0e-8", 0, 1, RL_CFG_MIN_OPEN, NULL, "AdamW's epsilon")        \
    X(INT, warmup, "actor.optim.warmup_steps", "0", 0, 1000000000, 0, NULL,                         \
      "optimiser steps of the linear warm-up")                                                      \
    X(ENUM, lr_schedule, "actor.optim.lr_schedule", "constant", 0, 0, 0, "constant|cosine|linear",  \
      "the learning rate after the warm-up")                                                        \
    X(INT, total_training_steps, "actor.optim.total_training_steps", "-1", -1, 1000000000000, 0,    \
      NULL, "optimiser steps of a decaying schedule (-1: the recipe sets those of its run)")        \
    X(NUM, value_lr, "actor.optim.value_lr", "0.0", 0, 10, 0, NULL,                                 \
      "the value head's lr (views value_head.*) on the same schedule (0: actor.optim.lr)")          \
    X(NUM, grad_clip, "actor.grad_clip", "1.0", 0, 1e9, 0, NULL,                                    \
      "global gradient-norm clip of an optimiser step (0: off)")                                    \
    X(INT, mini_batch, "actor.ppo_mini_batch_size", "16", 1, 1 << 24, 0, NULL,                      \
      "prompts per optimiser step (x rollout.n rows)")                                              \
    X(INT, micro_batch, "actor.ppo_micro_batch_size", "0", 0, 1 << 24, 0, NULL,                     \
      "rows per forward/backward (0: the whole mini-batch)")                                        \
    X(INT, epochs, "actor.ppo_epochs", "1", 1, 10000, 0, NULL, "passes over a step's batch")        \
    X(NUM, clip_low, "actor.clip_ratio_low", "0.2", 0, 1, 0, NULL, "PPO's ratio clip below 1")      \
    X(NUM, clip_high, "actor.clip_ratio_high", "0.2", 0, 10, 0, NULL,                               \
      "PPO's ratio clip above 1 (the flow-SDE losses' clip range too)")                             \
    X(NUM, clip_c, "actor.clip_ratio_c", "3.0", 1, 1e9, RL_CFG_MIN_OPEN, NULL,                      \
      "dual clip of negative advantages")                                                           \
    X(ENUM, loss_agg, "actor.loss_agg_mode", "token-mean", 0, 0, 0,                                 \
      "token-mean|seq-mean-token-sum|seq-mean-token-mean|seq-mean-token-sum-norm",                  \
      "how the loss of a mini-batch is aggregated over its tokens and sequences")                   \
    X(NUM, entropy_coeff, "actor.entropy_coeff", "0.0", -100, 100, 0, NULL,                         \
      "entropy bonus (the loss subtracts coeff x entropy)")                                         \
    X(BOOL, use_kl_loss, "actor.use_kl_loss", "false", 0, 0, 0, NULL,                               \
      "add kl_loss_coef x KL(policy || reference) to the loss")                                     \
    X(NUM, kl_loss_coef, "actor.kl_loss_coef", "0.001", 0, 1e6, 0, NULL, "weight of the KL loss")   \
    X(ENUM, kl_loss_type, "actor.kl_loss_type", "low_var_kl", 0, 0, 0, "kl|k1|abs|mse|k2|low_var_kl|k3", \
      "the KL estimator of the LM's KL loss")                                                       \
    X(NUM, comm_timeout_s, "actor.comm_timeout_s", "120.0", 0, 3600, RL_CFG_MIN_OPEN, NULL,         \
      "how long a collective or a weight publish waits for a peer (then recovery)")

typedef struct rl_actor_config {
    RL_ACTOR_KEYS(RL_CFG_FIELD)
    /* derived: the ENUM keys' text (borrowed from the tree) */
    const char *lr_schedule_name, *loss_agg_name, *kl_loss_type_name;
} rl_actor_config;

extern const rl_config_section rl_actor_section;

#endif
