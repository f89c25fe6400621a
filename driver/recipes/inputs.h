/* driver/recipes/inputs.h — the files and directories a job names, checked
 * by rl-driver before any worker starts.
 *
 * Purpose: a job that names a path which is not there (model.init_from, the
 * reward's scorers, the LIBERO scenes, the demonstrations, the
 * Fashion-MNIST files) fails at once, with the key, where it was set
 * (file:line or the override) and the path:
 *
 *     job.yaml:12:14: model.init_from: runs/arith_sft/final: no such directory
 *
 * instead of after the workers started. The paths the driver itself reads
 * at prepare (the LM's tokenizer and data files, warmstart.demos) are
 * checked by the recipe's prepare already.
 *
 * Which paths the driver may check (the rule): a path the driver reads is
 * always checked. A path a worker reads is checked only when every rank of
 * every role the recipe starts runs on a `launch: local` node of the
 * cluster: the driver spawns those workers itself, on its own host, in its
 * own working directory, so it sees what they will see. On a cluster with
 * ssh or external nodes (and for `rl-driver --check` without --cluster) a
 * worker's path may be local to its node: the driver leaves it to the
 * worker, whose own error names the key and the job file's line (the
 * locations travel with CONFIGURE), and says which keys it did not check.
 *
 * Invariants: nothing is created or changed; a path is "there" when it is
 * the kind the reader needs (a regular file, a directory, or a model
 * directory holding model.safetensors) and the driver's user may read it.
 * Ownership: the job and cluster are borrowed. */
#ifndef RLRT_DRIVER_INPUTS_H
#define RLRT_DRIVER_INPUTS_H

#include <stddef.h>

#include "rlrt/config.h"
#include "rlrt/runtime/cluster.h"

/* Checks every input path of `job` that the rule above lets the driver
 * check. `roles`: the cluster roles the recipe starts (NULL-terminated);
 * `cl`: the cluster, NULL when unknown (every worker path is then left to
 * the workers). RL_OK, or RL_ENOTFOUND / RL_EIO / RL_ECONFIG with the
 * located message of the first path that is not there. `unchecked` (cap
 * bytes; may be NULL) receives the keys left to the workers, ", "-separated,
 * "" when none. */
int rl_job_check_inputs(const rl_config *job, const char *const *roles, const rl_cluster *cl,
                        char *unchecked, size_t cap);

#endif
