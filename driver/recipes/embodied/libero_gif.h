/* driver/recipes/embodied/libero_gif.h — GIFs of the LIBERO recipes' evaluation
 * episodes (flow_warmstart, libero_rl), for people: after an evaluation
 * round the driver replays the first episodes of each task from what the
 * env ranks reported (task, initial state, actions as applied; the env is
 * deterministic, so the replay is the episode) and renders them
 * (common/sim/libero.h rl_libero_replay_gif) to
 *     <trainer.output_dir>/gifs/<tag>/task<T>_init<I>_<success|fail>.gif
 * (success or fail as the replay ended; a replay that disagrees with the env's
 * report is a warning).
 *
 * Config: the GIF section (common/schema/libero.h rl_libero_gif_section:
 * eval.gif_episodes_per_task, eval.gif_every, eval.gif_size), checked in
 * the recipe's prepare by rl_libero_gif_check (the frames of an episode fit
 * a GIF), so a bad value is a file:line error before any work; and the env
 * section's data_dir / scene (the scene the episodes ran in) and
 * auto_reset, trainer.output_dir.
 *
 * Cost, on the driver: a task's scenes are loaded once per call that has an
 * episode of it to draw (the full scene: seconds), then ~every / 4 frames a
 * second of episode time; measured numbers in docs/decisions/evaluation-gifs.md.
 *
 * Errors: a reply of the wrong shape, a task or initial state out of range
 * or a non-finite action (peer data) is an error naming the env rank and
 * row. What only costs the pictures — no EGL here, no scenes on the
 * driver's host, a GIF that cannot be written — is a warning, and the
 * evaluation goes on without them.
 * Ownership: the replies are borrowed. */
#ifndef RLRT_DRIVER_LIBERO_GIF_H
#define RLRT_DRIVER_LIBERO_GIF_H

#include <stdint.h>

#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/schema/env.h"

/* The GIF section checked against the env section (file:line errors). */
int rl_libero_gif_check(const rl_config *job);

/* GIFs of one evaluation round: the interact replies of its E env ranks
 * (workers/env/env.h), of which the first `rows` rows in rank order are
 * evaluated episodes (< 0: all). done[t] counts task t's GIFs written so far
 * in this evaluation (zero it before its first round); episodes of tasks
 * that have eval.gif_episodes_per_task are skipped. tag: the directory
 * under gifs/ (NULL: "step_<step>"). */
int rl_libero_eval_gifs(const rl_config *job, const char *tag, int64_t step, rl_dataproto *const *replies, int E,
                        int64_t rows, int64_t done[RL_ENV_MAX_TASKS]);

#endif
