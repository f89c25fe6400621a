/* workers/rollout/serve_env.h — the rollout's env-channel method
 * (RL_ENV_SERVE, contract in rlrt/roles/env.h and rlrt/roles/rollout.h). */
#ifndef RLRT_WORKERS_ROLLOUT_SERVE_ENV_H
#define RLRT_WORKERS_ROLLOUT_SERVE_ENV_H

#include "rlrt/runtime/worker.h"

/* meta RL_ENV_ENDPOINT → meta RL_ENV_M_POLICY_CALLS, RL_ENV_M_POLICY_S. */
int rl_rollout_serve_env(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);

#endif
