/* diffusion_common.c — driver-side pieces of the diffusion-track recipes
 * (see diffusion_common.h). */
#include "diffusion_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rlrt/rlrt.h"

uint64_t rl_dj_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int rl_dj_mkdirs(const char *dir)
{
    char buf[4096];
    if (strlen(dir) + 2 >= sizeof buf)
        return rl_error_set(RL_EINVAL, "path too long: %s", dir);
    snprintf(buf, sizeof buf, "%s/", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return rl_error_set(RL_EIO, "cannot create %s: %s", buf, strerror(errno));
        *p = '/';
    }
    return RL_OK;
}

int rl_dj_prepare(rl_config *job, int64_t updates_per_step)
{
    int64_t total, sched;
    if (rl_config_get_int_in(job, "trainer.total_steps", 0, 1000000000, &total) ||
        rl_config_get_int_in(job, "actor.optim.total_training_steps", -1, 1000000000000, &sched))
        return rl_error_code();
    if (sched == -1) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)(total * updates_per_step));
        if (rl_config_set_yaml(job, "actor.optim.total_training_steps", v))
            return rl_error_code();
    }
    rl_actor_config ac;
    rl_actor_diffusion_config dc;
    int rc = rl_model_check_config(job);
    if (!rc)
        rc = rl_actor_config_read(job, &ac);
    if (!rc && rl_config_has(job, "actor.clip_range"))
        rc = rl_actor_diffusion_config_read(job, &dc);
    return rc;
}

int rl_dj_sync_weights(rl_dj *j)
{
    return j->rollout ? rl_weight_sync_run(&j->sync, NULL, NULL) : RL_OK;
}

int rl_dj_restore(rl_dj *j, rl_trainer *t, int64_t want, int64_t *start, json_t **extra_out)
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
    return rl_dj_sync_weights(j);
}

int rl_dj_open(rl_dj *j, rl_driver *d, const rl_config *job, int with_rollout, int with_reward)
{
    memset(j, 0, sizeof *j);
    j->d = d;
    j->job = job;
    if (!(j->actor = rl_driver_group(d, RL_ACTOR_ROLE)) ||
        (with_rollout && !(j->rollout = rl_driver_group(d, RL_ROLLOUT_ROLE))) ||
        (with_reward && !(j->reward = rl_driver_group(d, RL_REWARD_ROLE))))
        return rl_error_code();
    if (rl_actor_config_read(job, &j->actor_cfg))
        return rl_error_code();
    return rl_actor_rollout_open(j->actor, j->rollout, &j->sync);
}

void rl_dj_close(rl_dj *j) { memset(j, 0, sizeof *j); }

int rl_dj_actor_step(rl_dj *j, const char *method, rl_dataproto *req, const char *const *keys,
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

int rl_dj_draw(const rl_fmnist *d, uint64_t seed, int64_t step, int64_t B, int frames,
               float *clips, int32_t *labels)
{
    rl_rng g;
    rl_rng_init(&g, seed, 0x100000000ull + (uint64_t)step);
    int64_t D = (int64_t)frames * RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    for (int64_t b = 0; b < B; b++) {
        int64_t img = (int64_t)rl_rng_below(&g, (uint64_t)d->n);
        int rc = rl_clip_build(d, img, frames, seed, (uint64_t)step * 1000003u + (uint64_t)b,
                               clips + b * D);
        if (rc)
            return rc;
        labels[b] = d->labels[img];
    }
    return RL_OK;
}
