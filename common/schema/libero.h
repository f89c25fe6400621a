/* common/schema/libero.h — the sections of the LIBERO recipes
 * (driver/recipes/embodied/): libero_rl's evaluation, the evaluation GIFs of
 * libero_rl and flow_warmstart, the warm start, and libero_collect; and the
 * defaults each of the three recipes changes in the sections it names. */
#ifndef RLRT_SCHEMA_LIBERO_H
#define RLRT_SCHEMA_LIBERO_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

/* libero_rl's evaluation: the ODE policy on fixed initial states */
#define RL_LIBERO_EVAL_KEYS(X)                                                                      \
    X(INT, episodes_per_task, "eval.episodes_per_task", "10", 1, 50, 0, NULL,                       \
      "episodes per task, from the first initial states (RLinf's protocol: 50)")                   \
    X(NUM, ema_decay, "eval.ema_decay", "0.0", 0, 1, RL_CFG_MAX_OPEN, NULL,                         \
      "d > 0: evaluate an EMA of the weights (d * theta + (1 - d) * theta_new at every sync)")

typedef struct rl_libero_eval_config {
    RL_LIBERO_EVAL_KEYS(RL_CFG_FIELD)
} rl_libero_eval_config;

extern const rl_config_section rl_libero_eval_section;

/* GIFs of evaluation episodes (driver/recipes/embodied/libero_gif.h) */
#define RL_LIBERO_GIF_KEYS(X)                                                                       \
    X(INT, per_task, "eval.gif_episodes_per_task", "1", 0, 50, 0, NULL,                             \
      "GIFs of the first k evaluated episodes of each task (0: none)")                              \
    X(INT, every, "eval.gif_every", "4", 1, 1000, 0, NULL,                                          \
      "a frame every k env steps (plays in real time: k * 50 ms a frame)")                          \
    X(INT, size, "eval.gif_size", "128", 16, 512, 0, NULL, "pixels a side (agent view)")

typedef struct rl_libero_gif_config {
    RL_LIBERO_GIF_KEYS(RL_CFG_FIELD)
} rl_libero_gif_config;

extern const rl_config_section rl_libero_gif_section;

/* flow_warmstart: few-shot SFT on demonstrations, then its evaluation */
#define RL_WARMSTART_KEYS(X)                                                                        \
    X(STR, demos, "warmstart.demos", "runs/libero_demos/demos.safetensors", 0, 0, RL_CFG_NONEMPTY,  \
      NULL, "libero_collect's dataset (examples/libero_collect.yaml makes it)")                    \
    X(INT, demos_per_task, "warmstart.demos_per_task", "10", 1, 100000, 0, NULL,                    \
      "successful episodes kept per task")                                                          \
    X(INT, steps, "warmstart.steps", "2000", 0, 100000000, 0, NULL, "optimiser steps")             \
    X(INT, batch_size, "warmstart.batch_size", "256", 1, 1 << 20, 0, NULL,                          \
      "pairs per step (a multiple of the actor ranks)")                                             \
    X(ENUM, beta_t, "warmstart.t_schedule", "beta", 0, 0, 0, "uniform|beta",                       \
      "flow times: uniform, or beta (pi0: 0.999 Beta(1.5, 1) + 0.001)")                             \
    X(INT, eval_episodes, "eval.episodes", "500", 0, 10000000, 0, NULL,                             \
      "greedy episodes after training (0: none)")

typedef struct rl_warmstart_config {
    RL_WARMSTART_KEYS(RL_CFG_FIELD)
} rl_warmstart_config;

extern const rl_config_section rl_warmstart_section;

/* libero_collect: episodes written as a demonstration dataset */
#define RL_COLLECT_KEYS(X)                                                                          \
    X(INT, episodes, "collect.episodes", "500", 1, 10000000, 0, NULL, "episodes to record")         \
    X(STR, output, "collect.output", "runs/libero_demos", 0, 0, RL_CFG_NONEMPTY, NULL,              \
      "the directory of demos.safetensors and dataset.json")                                        \
    X(BOOL, only_success, "collect.only_success", "false", 0, 0, 0, NULL,                           \
      "keep the successful episodes only")                                                          \
    X(INT, retries, "collect.retries", "2", 0, 100, 0, NULL,                                        \
      "re-runs of a round whose worker died (the driver restarts it)")                              \
    X(BOOL, greedy, "collect.greedy", "true", 0, 0, 0, NULL,                                        \
      "env.policy model: the ODE (false: the flow SDE)")

typedef struct rl_collect_config {
    RL_COLLECT_KEYS(RL_CFG_FIELD)
} rl_collect_config;

extern const rl_config_section rl_collect_section;

/* The defaults each recipe changes ({NULL, NULL}-terminated). */
extern const rl_config_default rl_libero_rl_changes[];
extern const rl_config_default rl_flow_warmstart_changes[];
extern const rl_config_default rl_libero_collect_changes[];

#endif
