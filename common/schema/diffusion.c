/* diffusion.c — the sections and changes of the diffusion track's recipes
 * (common/schema/diffusion.h). */
#include "common/schema/diffusion.h"

#include "common/schema/actor.h"
#include "common/schema/rollout.h"
#include "rlrt/error.h"

/* actor.ppo_mini_batch_size prompts a mini-batch must divide the batch; the
 * optimiser steps of a step for the lr schedule (rl_actor_job_prepare). */
static int s_data_check(const rl_config *c, void *out)
{
    rl_diffusion_data_config *d = out;
    const rl_batch_config *b = rl_config_section_get(c, &rl_batch_section);
    const rl_actor_config *a = b ? rl_config_section_get(c, &rl_actor_section) : NULL;
    if (!a)
        return rl_error_code();
    d->mini_batch = a->mini_batch;
    if (b->train_batch_size % d->mini_batch)
        return RL_CFG_ERROR2(c, &rl_actor_section, rl_actor_config, mini_batch, &rl_batch_section,
                             rl_batch_config, train_batch_size, RL_ECONFIG,
                             "%s (%lld) must divide %s (%lld)",
                             RL_CFG_PATH(&rl_actor_section, rl_actor_config, mini_batch),
                             (long long)d->mini_batch,
                             RL_CFG_PATH(&rl_batch_section, rl_batch_config, train_batch_size),
                             (long long)b->train_batch_size);
    d->updates_per_step = a->epochs * (b->train_batch_size / d->mini_batch);
    return RL_OK;
}

#define RL_CFG_DEFINE rl_diffusion_data_section, rl_diffusion_data_config, "common/schema/diffusion_data.def", s_data_check, \
    "data (diffusion GRPO)", "Validation of the diffusion recipe.", "the driver"
#include "common/schema/section.inc"

/* GRPO scores the SDE's log-probs: rollout.noise_level must be > 0. */
static int s_rollout_check(const rl_config *c, void *out)
{
    (void)out;
    const rl_rollout_flow_config *f = rl_config_section_get(c, &rl_rollout_flow_section);
    if (!f)
        return rl_error_code();
    if (!(f->noise_level > 0))
        return RL_CFG_ERROR(c, &rl_rollout_flow_section, rl_rollout_flow_config, noise_level,
                            RL_ECONFIG, "GRPO samples with the SDE: the noise level must be > 0");
    return RL_OK;
}

#define RL_CFG_DEFINE rl_diffusion_rollout_section, rl_diffusion_rollout_config, "common/schema/diffusion_rollout.def", s_rollout_check, \
    "rollout (diffusion GRPO)", "The diffusion recipe's sampling of groups and its online test images.", \
    "the driver"
#include "common/schema/section.inc"

static int s_algorithm_check(const rl_config *c, void *out)
{
    rl_diffusion_algorithm_config *o = out;
    const rl_estimator_config *e = rl_config_section_get(c, &rl_estimator_section);
    const rl_group_norm_config *g = e ? rl_config_section_get(c, &rl_group_norm_section) : NULL;
    if (!g)
        return rl_error_code();
    o->adv_estimator = e->adv_estimator;
    o->norm_adv_by_std_in_grpo = g->norm_adv_by_std_in_grpo;
    return RL_OK;
}

#define RL_CFG_DEFINE rl_diffusion_algorithm_section, rl_diffusion_algorithm_config, "common/schema/diffusion_algorithm.def", s_algorithm_check, \
    "algorithm (diffusion GRPO)", "Advantages of the diffusion recipe (Flow-GRPO / DanceGRPO).", "the driver"
#include "common/schema/section.inc"

static int s_constraint_check(const rl_config *c, void *out)
{
    const rl_diffusion_constraint_config *k = out;
    if (k->init < 0 && k->init != -1)
        return RL_CFG_ERROR(c, &rl_diffusion_constraint_section, rl_diffusion_constraint_config, init,
                            RL_ECONFIG, "the starting multiplier is >= 0, or -1 for the term's weight "
                                        "in reward.reward_model; got %g", k->init);
    return RL_OK;
}

#define RL_CFG_DEFINE rl_diffusion_constraint_section, rl_diffusion_constraint_config, "common/schema/diffusion_constraint.def", s_constraint_check, \
    "algorithm.constraint", "A scorer term held at a floor by a Lagrange multiplier moved after each step (common/algo/diffusion/diffusion.h, rl_constraint_pi_update).", \
    "the driver"
#include "common/schema/section.inc"

const rl_config_default rl_diffusion_changes[] = {
    {"trainer.val_every", "10"},
    {"trainer.save_every", "50"},
    {"trainer.output_dir", "runs/dance_grpo"},
    {"model.type", "clip_flow"},
    {"data.train_batch_size", "8"},
    {"actor.optim.lr", "1.0e-5"},
    {"actor.optim.weight_decay", "0.01"},
    {"actor.optim.lr_schedule", "cosine"},
    {"actor.optim.warmup_steps", "0"},
    {"actor.ppo_mini_batch_size", "8"},
    {"rollout.n", "8"},
    {NULL, NULL},
};

const rl_config_default rl_scorer_train_changes[] = {
    {"trainer.total_steps", "600"},
    {"trainer.output_dir", "runs/fmnist_scorer"},
    {"model.type", "image_classifier"},
    {"data.train_batch_size", "128"},
    {"actor.optim.lr", "1.0e-3"},
    {NULL, NULL},
};

const rl_config_default rl_flow_pretrain_changes[] = {
    {"trainer.total_steps", "2000"},
    {"trainer.output_dir", "runs/fmnist_flow"},
    {"model.type", "clip_flow"},
    {"data.train_batch_size", "128"},
    {"actor.optim.lr", "1.0e-3"},
    {NULL, NULL},
};


