/* workers/rollout/serve_env.h — the rollout's env-channel method
 * (RL_ENV_SERVE, contract in workers/env/env.h and workers/rollout/rollout.h):
 * the act of a policy that answers an env rank's observations. */
#ifndef RLRT_WORKERS_ROLLOUT_SERVE_ENV_H
#define RLRT_WORKERS_ROLLOUT_SERVE_ENV_H

#include "rlrt/runtime/worker.h"
#include "workers/rollout/hooks.h"

/* meta RL_ENV_ENDPOINT (+ greedy, record, round) → meta RL_ENV_M_POLICY_CALLS,
 * RL_ENV_M_POLICY_S and, with the model, the recorded rows
 * (workers/rollout/rollout.h). pol may be NULL for env.policy: expert. */
int rl_rollout_serve_env(rl_worker_ctx *ctx, const rl_rollout_policy *pol, const rl_dataproto *in,
                         rl_dataproto **out);

/* The noise seeds of (trainer.seed, round, global env, chunk step): which 0
 * is the initial-noise seed, 1 the row (SDE) seed; non-negative. */
int64_t rl_rollout_env_seed(uint64_t seed, int64_t round, int64_t global_env, int64_t chunk_step,
                            int which);

#endif
