/* libero.c — the sections of the LIBERO recipes and the defaults they change
 * (common/schema/libero.h). */
#include "common/schema/libero.h"

#define RL_CFG_DEFINE rl_libero_eval_section, rl_libero_eval_config, "common/schema/libero_eval.def", NULL, \
    "eval (libero_rl)", "libero_rl's evaluation every trainer.val_every steps and at step 0: the ODE policy on fixed initial states, success per task.", \
    "the driver; the rollout ranks (eval.ema_decay: the evaluation EMA)"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_libero_gif_section, rl_libero_gif_config, "common/schema/libero_gif.def", NULL, \
    "eval (GIFs)", "GIFs of evaluation episodes, replayed and drawn by the driver into <output_dir>/gifs/<tag>/ (libero_rl at step 0 and the last step, flow_warmstart).", \
    "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_warmstart_section, rl_warmstart_config, "common/schema/warmstart.def", NULL, \
    "warmstart", "flow_warmstart: few-shot flow matching of the flow policy on demonstrations, then greedy episodes of the result.", \
    "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_collect_section, rl_collect_config, "common/schema/collect.def", NULL, \
    "collect", "libero_collect: episodes of the env role driven by the rollout's policy, written as a demonstration dataset.", \
    "the driver"
#include "common/schema/section.inc"

const rl_config_default rl_libero_rl_changes[] = {
    {"model.type", "flow_policy"},
    {"env.auto_reset", "false"}, /* one episode per env per step */
    {"env.policy", "model"},
    {"trainer.total_steps", "20"},
    {"trainer.val_every", "5"},
    {"trainer.save_every", "10"},
    {"trainer.output_dir", "runs/libero_rl"},
    {"algorithm.gamma", "0.99"},
    {"rollout.num_steps", "4"},      /* RLinf pi0: 4 denoising steps */
    {"rollout.noise_level", "0.5"},  /* flow-SDE noise of the training rounds (flow_sar/flow_ipo: 0 = the ODE) */
    {"actor.optim.lr", "1.0e-4"},
    {"actor.optim.weight_decay", "0.0"},
    {"actor.ppo_mini_batch_size", "256"}, /* kept rows (policy calls) per optimiser step */
    {"actor.ppo_epochs", "1"},
    {NULL, NULL},
};

const rl_config_default rl_flow_warmstart_changes[] = {
    {"model.type", "flow_policy"},
    {"trainer.output_dir", "runs/libero_warmstart"},
    {"actor.optim.lr", "1.0e-3"},
    {NULL, NULL},
};

const rl_config_default rl_libero_collect_changes[] = {
    {"model.type", "flow_policy"},
    {NULL, NULL},
};


