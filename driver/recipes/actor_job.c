/* actor_job.c — the actor/rollout job of the diffusion and embodied
 * recipes (driver/recipes/actor_job.h). */
#include "driver/recipes/actor_job.h"

#include <stdio.h>
#include <string.h>

#include "common/schema/diffusion.h"
#include "common/schema/rollout.h"
#include "common/schema/trainer.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/schema/trainer.h"
#include "workers/rollout/rollout.h"
#include "workers/reward/reward.h"

int rl_actor_job_prepare(rl_config *job, int64_t updates_per_step)
{
    const rl_trainer_steps_config *steps = rl_config_section_get(job, &rl_trainer_steps_section);
    const rl_actor_config *ac = steps ? rl_config_section_get(job, &rl_actor_section) : NULL;
    if (!ac)
        return rl_error_code();
    if (ac->total_training_steps == -1) { /* the run's optimiser steps (the cache is dropped: ac goes) */
        /* derived from the user's keys: a bad value is theirs, not the derived key's */
        const char *const keys[] = {
            RL_CFG_PATH(&rl_trainer_steps_section, rl_trainer_steps_config, total_steps),
            RL_CFG_PATH(&rl_actor_section, rl_actor_config, epochs),
            RL_CFG_PATH(&rl_batch_section, rl_batch_config, train_batch_size),
            RL_CFG_PATH(&rl_actor_section, rl_actor_config, mini_batch), NULL};
        long long total;
        char v[40], why[160];
        if (__builtin_mul_overflow((long long)steps->total_steps, (long long)updates_per_step, &total))
            snprintf(v, sizeof v, "%.17g", (double)steps->total_steps * (double)updates_per_step);
        else
            snprintf(v, sizeof v, "%lld", total);
        snprintf(why, sizeof why, "%s %lld x %lld optimiser updates a step", keys[0],
                 (long long)steps->total_steps, (long long)updates_per_step);
        if (RL_CFG_DERIVE(job, &rl_actor_section, rl_actor_config, total_training_steps, v, keys, why))
            return rl_error_code();
    }
    int rc = rl_model_check_config(job);
    if (!rc && !rl_config_section_get(job, &rl_actor_section))
        rc = rl_error_code();
    if (!rc && rl_config_has_section(job, &rl_actor_diffusion_section) &&
        !rl_config_section_get(job, &rl_actor_diffusion_section))
        rc = rl_error_code();
    return rc;
}

int rl_actor_job_sync_weights(rl_actor_job *j)
{
    return j->rollout ? rl_weight_sync_run(&j->sync, NULL, NULL) : RL_OK;
}

int rl_actor_job_restore(rl_actor_job *j, rl_trainer *t, int64_t want, int64_t *start, json_t **extra_out)
{
    int64_t epoch, pos;
    json_t *extra = NULL;
    if (extra_out)
        *extra_out = NULL;
    int rc = rl_trainer_restore(t, j->actor, want, start, &epoch, &pos, &extra);
    if (rc || *start == 0) {
        json_decref(extra);
        return rc;
    }
    const json_t *wv = json_object_get(extra, "weight_version");
    /* versions grow by one a step and one a resume: 2^53 is past any run,
     * and keeps version + 1 from overflowing */
    if (wv && (!json_is_integer(wv) || json_integer_value(wv) < 0 ||
               json_integer_value(wv) > ((json_int_t)1 << 53))) {
        json_decref(extra);
        return rl_error_set(RL_EPROTO, "checkpoint of step %lld: extra.weight_version: expected an "
                                       "integer in 0 .. 2^53", (long long)*start);
    }
    if (json_is_integer(wv) && json_integer_value(wv) > j->sync.version)
        j->sync.version = json_integer_value(wv);
    if (extra_out)
        *extra_out = extra;
    else
        json_decref(extra);
    return rl_actor_job_sync_weights(j);
}

int rl_actor_job_open(rl_actor_job *j, rl_driver *d, const rl_config *job, int with_rollout, int with_reward)
{
    memset(j, 0, sizeof *j);
    j->d = d;
    j->job = job;
    if (!(j->actor = rl_driver_group(d, RL_ACTOR_ROLE)) ||
        (with_rollout && !(j->rollout = rl_driver_group(d, RL_ROLLOUT_ROLE))) ||
        (with_reward && !(j->reward = rl_driver_group(d, RL_REWARD_ROLE))))
        return rl_error_code();
    const rl_actor_config *ac = rl_config_section_get(job, &rl_actor_section);
    if (!ac)
        return rl_error_code();
    j->actor_cfg = *ac;
    /* rollout.weight_transport and where both sides run (rollout.def: auto|zeromq|broadcast, cpu|cuda) */
    const rl_rollout_config *ro = j->rollout ? rl_config_section_get(job, &rl_rollout_section) : NULL;
    if (j->rollout && !ro)
        return rl_error_code();
    int transport = ro ? ro->weight_transport : 0, both_cuda = ro && ro->device == 1 && ac->device == 1;
    if (transport == 2 && ro->device != ac->device)
        return RL_CFG_ERROR(job, &rl_rollout_section, rl_rollout_config, weight_transport, RL_EINVAL,
                            "the broadcast needs the actor and the rollout on one kind of device (NCCL between "
                            "GPUs, the ring between CPUs): %s is %s, %s %s",
                            RL_CFG_PATH(&rl_actor_section, rl_actor_config, device), ac->device == 1 ? "cuda" : "cpu",
                            RL_CFG_PATH(&rl_rollout_section, rl_rollout_config, device),
                            ro->device == 1 ? "cuda" : "cpu");
    return rl_actor_rollout_open(j->actor, j->rollout, transport, both_cuda, &j->sync);
}

void rl_actor_job_close(rl_actor_job *j)
{
    rl_future_free(j->sync.pending); /* a detached sync's replies: dropped when they come */
    memset(j, 0, sizeof *j);
}

int rl_actor_job_actor_step(rl_actor_job *j, const char *method, rl_dataproto *req, const char *const *keys,
                     int n, double *sums, double *grad_norm, double *lr)
{
    for (int k = 0; k < n; k++)
        sums[k] = 0;
    rl_future *f = rl_group_call(j->actor, method, RL_DISPATCH_DP_COMPUTE, req);
    int rc = f ? rl_future_wait(f, -1) : rl_error_code();
    for (int r = 0; !rc && r < rl_group_size(j->actor); r++) {
        rl_dataproto *o = NULL;
        rc = rl_future_take_rank(f, r, &o);
        if (!rc && !o)
            rc = rl_error_set(RL_EPROTO, "actor/%d returned no %s result", r, method);
        for (int k = 0; !rc && k < n; k++) {
            double v;
            if (!(rc = rl_dataproto_meta_get_double(o, keys[k], -1e300, 1e300, &v)))
                sums[k] += v;
        }
        if (!rc && r == 0 &&
            !(rc = rl_dataproto_meta_get_double(o, RL_ACTOR_M_GRAD_NORM, 0, 1e300, grad_norm)))
            rc = rl_dataproto_meta_get_double(o, RL_ACTOR_M_LR, 0, 1e300, lr);
        if (rc)
            rc = rl_error_wrap(rc, "actor/%d %s reply", r, method);
        rl_dataproto_free(o);
    }
    rl_future_free(f);
    return rc;
}

