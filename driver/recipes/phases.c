/* phases.c — phases, trainer cadence, weight sync and checkpoints shared by
 * every recipe (see phases.h). */
#include "driver/recipes/phases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/nn/engine/checkpoint.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/metrics/metrics.h"
#include "common/schema/trainer.h"
#include "workers/actor/actor.h"
#include "workers/rollout/rollout.h"

double rl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int rl_phases_run(const rl_phase *phases, int n, void *ctx, rl_metric_set *ms)
{
    for (int i = 0; i < n; i++) {
        double t0 = rl_now_s();
        int rc = phases[i].run(ctx);
        if (rc)
            return rl_error_wrap(rc, "phase %s", phases[i].name);
        if (!phases[i].untimed) {
            char key[96];
            snprintf(key, sizeof key, "%s%s", RL_M_TIMING_PREFIX, phases[i].name);
            rl_metric_set_put(ms, key, rl_now_s() - t0);
        }
    }
    return RL_OK;
}

/* ---- trainer ----------------------------------------------------------------------------- */

int rl_trainer_open(rl_trainer *t, rl_driver *d, const rl_config *job)
{
    memset(t, 0, sizeof *t);
    t->d = d;
    t->job = job;
    const rl_trainer_config *tc = rl_config_section_get(job, &rl_trainer_section);
    const rl_trainer_steps_config *sc = tc ? rl_config_section_get(job, &rl_trainer_steps_section) : NULL;
    if (!sc)
        return rl_error_code();
    t->total_steps = sc->total_steps;
    t->val_every = sc->val_every;
    /* checkpoints exist only in recipes that have the section */
    if (rl_config_has_section(job, &rl_trainer_ckpt_section)) {
        const rl_trainer_ckpt_config *ck = rl_config_section_get(job, &rl_trainer_ckpt_section);
        if (!ck)
            return rl_error_code();
        t->save_every = ck->save_every;
        t->resume = ck->resume;
    }
    t->out_dir = tc->output_dir;
    t->seed = (uint64_t)tc->seed;
    snprintf(t->ckpt_dir, sizeof t->ckpt_dir, "%s/checkpoints", t->out_dir);
    t->ms = rl_metric_set_new();
    return t->ms ? RL_OK : rl_error_set(RL_ENOMEM, "trainer: out of memory");
}

int rl_trainer_open_metrics(rl_trainer *t, int64_t start)
{
    t->sink = rl_metrics_open(t->out_dir, start > 0 ? start : -1, 0);
    if (!t->sink)
        return rl_error_code();
    rl_trainer_cpu_mark(t);
    return RL_OK;
}

void rl_trainer_cpu_mark(rl_trainer *t)
{
    if (!t->d)
        return;
    rl_driver_cpu_usage(t->d, &t->cpu_mark);
    t->cpu_mark_wall_s = rl_now_s();
    t->cpu_mark_restarts = rl_driver_restarts(t->d);
}

int rl_trainer_put_cpu(rl_trainer *t)
{
    if (!t->d || !t->cpu_mark.complete)
        return RL_OK;
    rl_driver_cpu now;
    rl_driver_cpu_usage(t->d, &now);
    double wall = rl_now_s() - t->cpu_mark_wall_s, cpu = now.cpu_s - t->cpu_mark.cpu_s;
    if (!now.complete || rl_driver_restarts(t->d) != t->cpu_mark_restarts || wall <= 0 || cpu < 0)
        return RL_OK;
    int rc = rl_metric_set_put(t->ms, "perf/cpu_cores_busy", cpu / wall);
    return rc ? rc : rl_metric_set_put(t->ms, "perf/cpu_cores", now.cores);
}

void rl_trainer_close(rl_trainer *t)
{
    if (t->sink)
        rl_metrics_close(t->sink);
    rl_metric_set_free(t->ms);
    t->sink = NULL;
    t->ms = NULL;
}

int rl_trainer_due(const rl_trainer *t, int64_t step, int64_t every)
{
    return every > 0 && (step % every == 0 || step == t->total_steps);
}

int rl_trainer_log_step(rl_trainer *t, int64_t step)
{
    char line[1024];
    rl_metrics_format_console(t->ms, step, line, sizeof line);
    rl_log_info("%s", line);
    return rl_metrics_log(t->sink, step, t->ms);
}

/* ---- weight sync ------------------------------------------------------------------------------ */

/* A 0-row request whose meta is `base` plus `args` (both borrowed). */
static rl_dataproto *s_args(json_t *base, const json_t *args)
{
    if (!base)
        return NULL;
    if (args && json_object_update(base, (json_t *)args)) {
        json_decref(base);
        rl_error_set(RL_ENOMEM, "weight sync: out of memory");
        return NULL;
    }
    return rl_dataproto_new_meta(base);
}

/* Receiver rank r is on the GPU of the sender's rank 0 (same node, same
 * first GPU of its placement). */
static int s_same_gpu(const rl_weight_sync *s, int r)
{
    const rl_placement *a = rl_group_placement(s->sender, 0), *b = rl_group_placement(s->receivers, r);
    return a && b && a->node == b->node && a->ngpus > 0 && b->ngpus > 0 && a->gpus[0] == b->gpus[0];
}

/* Receiver rank r takes the broadcast (rlrt/runtime/weight_bcast.h): every
 * rank with rollout.weight_transport broadcast; with auto, the ranks placed
 * on a GPU other than the sender's when both sides run on CUDA. */
static int s_bcast_rank(const rl_weight_sync *s, int r)
{
    if (s->transport == 2)
        return 1;
    const rl_placement *a = rl_group_placement(s->sender, 0), *b = rl_group_placement(s->receivers, r);
    return s->transport == 0 && s->both_cuda && a && b && a->ngpus > 0 && b->ngpus > 0 && !s_same_gpu(s, r);
}

int rl_weight_sync_run(rl_weight_sync *s, const json_t *args, rl_future **replies)
{
    if (replies)
        *replies = NULL;
    if (s->pending) { /* the receivers' calls of the last (detached) sync */
        int wait = s->timeout_ms > 0 ? s->timeout_ms : -1;
        int rc = rl_future_wait(s->pending, wait);
        rl_future_free(s->pending);
        s->pending = NULL;
        if (rc)
            return rl_error_wrap(rc, "weight sync of version %lld (receivers)", (long long)s->version);
    }
    int nr = rl_group_size(s->receivers), n_same = 0, n_b = 0;
    for (int r = 0; r < nr; r++) {
        n_b += s_bcast_rank(s, r);
        n_same += s->transport == 0 && !s_bcast_rank(s, r) && s_same_gpu(s, r);
    }
    if (!s->endpoint[0]) {
        json_t *open = json_pack("{s:s}", RL_ACTOR_HOST, rl_group_address(s->sender, 0));
        if (open && n_same)
            json_object_set_new(open, RL_ACTOR_IPC_RECEIVERS, json_integer(n_same));
        if (open && n_b)
            json_object_set_new(open, RL_ACTOR_BCAST_RECEIVERS, json_integer(n_b));
        rl_dataproto *in = s_args(open, NULL), *out = NULL;
        int rc = in ? rl_group_call_sync(s->sender, s->open, RL_DISPATCH_RANK_ZERO, in, &out)
                    : rl_error_code();
        rl_dataproto_free(in);
        const char *ep = rc ? NULL : rl_dataproto_meta_str(out, RL_ACTOR_ENDPOINT, NULL);
        if (ep && strlen(ep) >= sizeof s->endpoint)
            rc = rl_error_set(RL_EPROTO, "%s returned an endpoint of %zu characters", s->open,
                              strlen(ep));
        else if (ep)
            snprintf(s->endpoint, sizeof s->endpoint, "%s", ep);
        const char *iep = rc ? NULL : rl_dataproto_meta_str(out, RL_ACTOR_IPC_ENDPOINT, "");
        if (iep && strlen(iep) < sizeof s->ipc_endpoint)
            snprintf(s->ipc_endpoint, sizeof s->ipc_endpoint, "%s", iep);
        const char *bid = rc || !n_b ? NULL : rl_dataproto_meta_str(out, RL_ACTOR_BCAST_ID, "");
        if (bid && (!*bid || strlen(bid) >= sizeof s->bcast_id))
            rc = rl_error_set(RL_EPROTO, "%s returned no usable %s for %d broadcast receiver(s)", s->open,
                              RL_ACTOR_BCAST_ID, n_b);
        else if (bid)
            snprintf(s->bcast_id, sizeof s->bcast_id, "%s", bid);
        if (n_b && !rc)
            rl_log_info("weight sync: %d %s rank(s) by broadcast from %s/0", n_b, rl_group_role(s->receivers),
                        rl_group_role(s->sender));
        if (n_same)
            rl_log_info("weight sync: %d %s rank(s) on the GPU of %s/0: %s", n_same,
                        rl_group_role(s->receivers), rl_group_role(s->sender),
                        s->ipc_endpoint[0] ? "CUDA IPC" : "ZeroMQ (the sender offers no CUDA IPC)");
        rl_dataproto_free(out);
        if (rc || !ep)
            return rl_error_wrap(rc ? rc : rl_error_code(), "opening the weight channel");
    }
    int64_t version = s->version + 1;
    int n_ipc = s->ipc_endpoint[0] ? n_same : 0;
    json_t *pj = json_pack("{s:I, s:i}", RL_ACTOR_VERSION, (json_int_t)version, RL_ACTOR_RECEIVERS,
                           nr - n_ipc - n_b);
    if (pj && n_ipc)
        json_object_set_new(pj, RL_ACTOR_IPC_RECEIVERS, json_integer(n_ipc));
    if (pj && n_b)
        json_object_set_new(pj, RL_ACTOR_BCAST_RECEIVERS, json_integer(n_b));
    rl_dataproto *pub = s_args(pj, args);
    /* each receiver rank also gets its node's address: where it binds its
     * input when the sender chains them (rlrt/runtime/channel.h) */
    rl_dataproto **sub = calloc((size_t)nr, sizeof *sub);
    int ok = pub && sub;
    for (int r = 0, k = 0; ok && r < nr; r++) {
        json_t *rj = json_pack("{s:s, s:I, s:s}", RL_ACTOR_ENDPOINT, s->endpoint, RL_ACTOR_VERSION,
                               (json_int_t)version, RL_ACTOR_HOST, rl_group_address(s->receivers, r));
        int bc = s_bcast_rank(s, r);
        if (rj && bc) {
            json_object_set_new(rj, RL_ROLLOUT_BCAST_ID, json_string(s->bcast_id));
            json_object_set_new(rj, RL_ROLLOUT_BCAST_RANK, json_integer(++k));
            json_object_set_new(rj, RL_ROLLOUT_BCAST_WORLD, json_integer(n_b + 1));
        }
        if (rj && n_ipc && !bc && s_same_gpu(s, r))
            json_object_set_new(rj, RL_ROLLOUT_IPC_ENDPOINT, json_string(s->ipc_endpoint));
        ok = (sub[r] = s_args(rj, args)) != NULL;
    }
    rl_future *fp = ok ? rl_group_call(s->sender, s->publish, RL_DISPATCH_RANK_ZERO, pub) : NULL;
    rl_future *fs = fp ? rl_group_call_each(s->receivers, s->receive, sub) : NULL;
    int wait = s->timeout_ms > 0 ? s->timeout_ms : -1;
    /* a side that fails (a lost worker) ends the sync at once: the other
     * side waits for it no longer than the recovery's abort takes */
    rl_future *both[2] = {fs, fp};
    int detach = s->detach && !replies; /* the publish is acknowledged by every receiver */
    int rc = fs && fp ? rl_future_wait_all(both + detach, 2 - detach, wait)
                      : ok ? rl_error_code() : RL_ENOMEM;
    if (!ok)
        rl_error_set(RL_ENOMEM, "weight sync: out of memory");
    rl_dataproto_free(pub);
    for (int r = 0; sub && r < nr; r++)
        rl_dataproto_free(sub[r]);
    free(sub);
    if (!rc) {
        s->version = version;
        /* what the sender measured (a sender that says nothing: zeros) */
        rl_dataproto *m = NULL;
        s->sync_bytes = s->sync_s = s->sync_gbps = 0;
        s->sync_transport[0] = 0;
        if (rl_future_take(fp, &m) == RL_OK && m) {
            rl_dataproto_meta_double(m, RL_ACTOR_SYNC_BYTES, 0, &s->sync_bytes);
            rl_dataproto_meta_double(m, RL_ACTOR_SYNC_S, 0, &s->sync_s);
            rl_dataproto_meta_double(m, RL_ACTOR_SYNC_GBPS, 0, &s->sync_gbps);
            snprintf(s->sync_transport, sizeof s->sync_transport, "%s",
                     rl_dataproto_meta_str(m, RL_ACTOR_SYNC_TRANSPORT, ""));
        }
        rl_dataproto_free(m);
        if (replies || detach) {
            *(replies ? replies : &s->pending) = fs;
            fs = NULL;
        }
    }
    rl_future_free(fp);
    rl_future_free(fs);
    return rc;
}

int rl_weight_sync_metrics(const rl_weight_sync *s, rl_metric_set *ms)
{
    if (!s->sync_transport[0])
        return RL_OK;
    int rc = rl_metric_set_put(ms, "perf/weight_sync_bytes", s->sync_bytes);
    if (!rc)
        rc = rl_metric_set_put(ms, "perf/weight_sync_s", s->sync_s);
    if (!rc)
        rc = rl_metric_set_put(ms, "perf/weight_sync_gbps", s->sync_gbps);
    if (!rc)
        rc = rl_metric_set_put(ms, "perf/weight_sync_cuda_ipc", strstr(s->sync_transport, "cuda_ipc") ? 1 : 0);
    if (!rc)
        rc = rl_metric_set_put(ms, "perf/weight_sync_broadcast", strstr(s->sync_transport, "broadcast") ? 1 : 0);
    return rc;
}

/* ---- the actor–rollout pair ------------------------------------------------------------------- */

/* The FSDP communicator's id from actor rank 0 (only with W > 1). */
static int s_comm_id(rl_group *actor, json_t **init_args)
{
    *init_args = json_object();
    if (!*init_args)
        return rl_error_set(RL_ENOMEM, "out of memory");
    if (rl_group_size(actor) < 2)
        return RL_OK;
    rl_dataproto *req = rl_dataproto_new_meta(
        json_pack("{s:s}", RL_ACTOR_HOST, rl_group_address(actor, 0))), *res = NULL;
    int rc = req ? rl_group_call_sync(actor, RL_ACTOR_COMM_ID_CREATE, RL_DISPATCH_RANK_ZERO, req, &res)
                 : rl_error_code();
    const char *id = rc ? NULL : rl_dataproto_meta_str(res, RL_ACTOR_COMM_ID, NULL);
    if (id)
        json_object_set_new(*init_args, RL_ACTOR_COMM_ID, json_string(id));
    rl_dataproto_free(req);
    rl_dataproto_free(res);
    return id ? RL_OK : rl_error_code();
}

int rl_actor_rollout_open(rl_group *actor, rl_group *rollout, int transport, int both_cuda, rl_weight_sync *sync)
{
    *sync = (rl_weight_sync){.sender = actor, .receivers = rollout,
                             .open = RL_ACTOR_WEIGHTS_OPEN, .publish = RL_ACTOR_PUBLISH_WEIGHTS,
                             .receive = RL_ROLLOUT_SYNC_WEIGHTS, .transport = transport, .both_cuda = both_cuda};
    json_t *init_args;
    int rc = s_comm_id(actor, &init_args);
    rl_dataproto *init = rc ? NULL : rl_dataproto_new_meta(init_args);
    if (rc || !init)
        return rc ? rc : rl_error_code();
    rl_future *fa = rl_group_call(actor, RL_ACTOR_INIT_MODEL, RL_DISPATCH_ONE_TO_ALL, init);
    rl_future *fr = rollout ? rl_group_call(rollout, RL_ROLLOUT_INIT_MODEL, RL_DISPATCH_ONE_TO_ALL, NULL)
                            : NULL;
    rc = fa ? rl_future_wait(fa, -1) : rl_error_code();
    int rc2 = rollout ? (fr ? rl_future_wait(fr, -1) : rl_error_code()) : RL_OK;
    rl_future_free(fa);
    rl_future_free(fr);
    rl_dataproto_free(init);
    if (rc || rc2)
        return rc ? rc : rc2;
    return rollout ? rl_weight_sync_run(sync, NULL, NULL) : RL_OK;
}

/* ---- calls ------------------------------------------------------------------------------------- */

int rl_call_all(rl_group *g, const char *method, json_t *args)
{
    rl_dataproto *in = rl_dataproto_new_meta(args ? args : json_object());
    if (!in)
        return rl_error_code();
    int rc = rl_group_call_sync(g, method, RL_DISPATCH_ONE_TO_ALL, in, NULL);
    rl_dataproto_free(in);
    return rc;
}

/* ---- checkpoints -------------------------------------------------------------------------------- */

int rl_trainer_save(rl_trainer *t, rl_group *actor, int64_t step, int64_t epoch,
                    int64_t data_position, const json_t *extra)
{
    json_t *args = json_pack("{s:s, s:I, s:I, s:I, s:o}", RL_ACTOR_DIR, t->ckpt_dir, RL_ACTOR_STEP,
                             (json_int_t)step, RL_ACTOR_EPOCH, (json_int_t)epoch,
                             RL_ACTOR_DATA_POSITION, (json_int_t)data_position, RL_ACTOR_EXTRA,
                             extra ? json_incref((json_t *)extra) : json_object());
    if (args && t->save_files &&
        json_object_set_new(args, RL_ACTOR_FILES, json_deep_copy(t->save_files))) {
        json_decref(args);
        args = NULL;
    }
    if (!args)
        return rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    int rc = rl_call_all(actor, RL_ACTOR_SAVE_CHECKPOINT, args);
    if (!rc)
        rl_log_info("checkpoint step %lld saved under %s", (long long)step, t->ckpt_dir);
    return rc;
}

int rl_trainer_restore(rl_trainer *t, rl_group *actor, int64_t want, int64_t *step,
                       int64_t *epoch, int64_t *data_position, json_t **extra)
{
    *step = *epoch = *data_position = 0;
    *extra = NULL;
    rl_checkpoint_info info;
    memset(&info, 0, sizeof info);
    if (want > 0) {
        int n = snprintf(info.dir, sizeof info.dir, "%.*s/step_%lld", (int)sizeof info.dir - 32,
                         t->ckpt_dir, (long long)want);
        if (n < 0 || n >= (int)sizeof info.dir)
            return rl_error_set(RL_EINVAL, "checkpoint path under %s is too long", t->ckpt_dir);
        char which[1024];
        int frc = rl_checkpoint_verify(info.dir, &info.unverified, which, sizeof which);
        if (frc)
            return rl_error_wrap(frc, "checkpoint %s is missing, incomplete or damaged", info.dir);
        if (info.unverified)
            snprintf(info.note, sizeof info.note, "%s: no " RL_CKPT_SUMS ": cannot be verified", which);
    } else {
        const char *key = RL_CFG_PATH(&rl_trainer_ckpt_section, rl_trainer_ckpt_config, resume);
        int frc = rl_checkpoint_find(t->ckpt_dir, &info);
        if (frc == RL_ENOTFOUND) { /* nothing saved yet: a fresh start */
            rl_log_warn("%s: %s; starting from scratch", key, rl_error_message());
            return RL_OK;
        }
        if (frc) /* damaged or unreadable: starting afresh would write over them */
            return rl_error_wrap(frc, "%s", key);
    }
    rl_dataproto *req = rl_dataproto_new_meta(json_pack("{s:s}", RL_ACTOR_PATH, info.dir)), *out = NULL;
    rl_future *f = req ? rl_group_call(actor, RL_ACTOR_LOAD_CHECKPOINT, RL_DISPATCH_ONE_TO_ALL, req) : NULL;
    int rc = f ? rl_future_wait(f, -1) : rl_error_code();
    if (!rc)
        rc = rl_future_take_rank(f, 0, &out);
    rl_future_free(f);
    rl_dataproto_free(req);
    if (!rc && !out)
        rc = rl_error_set(RL_EPROTO, "%s returned no payload", RL_ACTOR_LOAD_CHECKPOINT);
    if (!rc)
        rc = rl_dataproto_meta_get_int(out, RL_ACTOR_STEP, 0, INT64_MAX, step);
    if (!rc)
        rc = rl_dataproto_meta_get_int(out, RL_ACTOR_EPOCH, 0, INT64_MAX, epoch);
    if (!rc)
        rc = rl_dataproto_meta_get_int(out, RL_ACTOR_DATA_POSITION, 0, INT64_MAX, data_position);
    if (!rc) {
        json_t *e = json_object_get(rl_dataproto_meta(out), RL_ACTOR_EXTRA);
        *extra = json_is_object(e) ? json_incref(e) : NULL;
        if (info.note[0]) /* damaged steps skipped, or files that cannot be verified */
            rl_log_warn("resumed from %s (step %lld); %s", info.dir, (long long)*step, info.note);
        else
            rl_log_info("resumed from %s (step %lld)", info.dir, (long long)*step);
    }
    rl_dataproto_free(out);
    return rc ? rl_error_wrap(rc, "restoring %s", info.dir) : RL_OK;
}

/* ---- recovery ------------------------------------------------------------------------------ */

int rl_recovery_open(rl_recovery *r, const rl_config *job)
{
    memset(r, 0, sizeof *r);
    const rl_trainer_recovery_config *rc = rl_config_section_get(job, &rl_trainer_recovery_section);
    if (!rc)
        return rl_error_code();
    r->max = rc->max_recoveries;
    return RL_OK;
}

void rl_recovery_close(rl_recovery *r)
{
    free(r->mark);
    r->mark = NULL;
    r->n_mark = 0;
}

/* Ranks of every started group. */
static int s_count_ranks(rl_driver *d)
{
    int n = 0;
    for (int i = 0; i < rl_driver_group_count(d); i++)
        n += rl_group_size(rl_driver_group_at(d, i));
    return n;
}

int rl_recovery_mark(rl_recovery *r, rl_driver *d)
{
    int n = s_count_ranks(d);
    if (n != r->n_mark) {
        int64_t *m = realloc(r->mark, sizeof(int64_t) * (size_t)(n ? n : 1));
        if (!m)
            return rl_error_set(RL_ENOMEM, "recovery: out of memory");
        r->mark = m;
        r->n_mark = n;
    }
    for (int i = 0, k = 0; i < rl_driver_group_count(d); i++) {
        rl_group *g = rl_driver_group_at(d, i);
        for (int rank = 0; rank < rl_group_size(g); rank++)
            r->mark[k++] = rl_group_incarnation(g, rank);
    }
    return RL_OK;
}

int rl_recovery_check(rl_recovery *r, rl_driver *d, int64_t step)
{
    char why[1024];
    int code = rl_error_code();
    snprintf(why, sizeof why, "%s", rl_error_message());
    if (r->max <= 0 || rl_driver_interrupted(d) || rl_driver_fatal(d) || !r->mark)
        return rl_error_set(code, "%s", why), 0;
    /* the supervisor restarts what died: wait until every role answers */
    for (int i = 0; i < rl_driver_group_count(d); i++)
        if (rl_group_wait_ready(rl_driver_group_at(d, i), 600000)) {
            rl_log_error("recovery: %s", rl_error_message());
            return rl_error_set(code, "%s", why), 0;
        }
    char lost[512] = "";
    int n = 0;
    for (int i = 0, k = 0; i < rl_driver_group_count(d) && k < r->n_mark; i++) {
        rl_group *g = rl_driver_group_at(d, i);
        for (int rank = 0; rank < rl_group_size(g) && k < r->n_mark; rank++, k++)
            if (rl_group_incarnation(g, rank) != r->mark[k] && n < (int)sizeof lost - 80)
                n += snprintf(lost + n, sizeof lost - (size_t)n, "%s%s/%d", n ? ", " : "",
                              rl_group_role(g), rank);
    }
    if (!n) /* nobody was replaced: a real error */
        return rl_error_set(code, "%s", why), 0;
    if (r->count >= r->max) {
        rl_log_error("step %lld lost %s, but %s = %lld were used", (long long)step, lost,
                     RL_CFG_PATH(&rl_trainer_recovery_section, rl_trainer_recovery_config, max_recoveries),
                     (long long)r->max);
        return rl_error_set(code, "%s", why), 0;
    }
    /* the failed step's calls still running on the surviving ranks finish
     * before the recipe sends the reopening calls, which would queue behind
     * them: first their waits on lost peers end (a collective with a dead
     * rank, a rollout waiting for a dead actor's weights), then the drain
     * sees every call done. The driver aborted the dead ranks' own groups
     * when it lost them; this reaches the other groups too. */
    char reason[600];
    snprintf(reason, sizeof reason, "step %lld is replayed (%s restarted)", (long long)step, lost);
    for (int i = 0; i < rl_driver_group_count(d); i++)
        if (rl_group_abort(rl_driver_group_at(d, i), reason, 10000))
            rl_log_warn("recovery: %s", rl_error_message());
    for (int i = 0; i < rl_driver_group_count(d); i++)
        if (rl_group_drain(rl_driver_group_at(d, i), 600000)) {
            rl_log_error("recovery: %s", rl_error_message());
            return rl_error_set(code, "%s", why), 0;
        }
    r->count++;
    if (r->saved_step > 0)
        rl_log_warn("step %lld failed (%s); %s restarted: restoring checkpoint step %lld and "
                    "replaying from there (recovery %lld of %lld)", (long long)step, why, lost,
                    (long long)r->saved_step, (long long)r->count, (long long)r->max);
    else
        rl_log_warn("step %lld failed (%s); %s restarted: no checkpoint of this run yet, replaying "
                    "from the start (recovery %lld of %lld)", (long long)step, why, lost,
                    (long long)r->count, (long long)r->max);
    rl_error_clear();
    return 1;
}

/* ---- one trainer loop ------------------------------------------------------------------------- */

/* Opens the trainer and the recipe and brings them to their first step:
 * checkpoint `restore` (-1: the newest; k > 0: step k; 0: a fresh start
 * with the at_start hooks logged as step 0). */
static int s_recipe_start(rl_driver *d, const rl_config *job, rl_trainer *t, void *st,
                          const rl_recipe_loop *l, int64_t restore, int64_t *start)
{
    *start = 0;
    int rc = rl_trainer_open(t, d, job);
    if (!rc)
        rc = l->open(st, t);
    if (!rc && restore && l->restore)
        rc = l->restore(st, restore, start);
    if (!rc && *start == 0 && l->fresh)
        rc = l->fresh(st);
    /* resuming drops the metrics logged after the checkpoint; a fresh start all */
    if (!rc)
        rc = rl_trainer_open_metrics(t, *start);
    if (!rc && *start == 0 && l->hooks) {
        rl_recipe_hook hooks[RL_MAX_HOOKS];
        int n = l->hooks(st, hooks), ran = 0;
        rl_metric_set_clear(t->ms);
        for (int i = 0; !rc && i < n; i++)
            if (hooks[i].at_start) {
                rc = hooks[i].run(st);
                ran = 1;
            }
        if (!rc && ran)
            rc = rl_metrics_log(t->sink, 0, t->ms);
    }
    rl_trainer_cpu_mark(t); /* step 1's interval starts after step 0's hooks */
    return rc;
}

/* One step: the phases and the step's own metrics, then (the same in every
 * recipe) timing_s/step unless the recipe put it, the job's CPU use, each
 * hook whose cadence is due, in order, the console line and the metrics
 * sink, a checkpoint when trainer.save_every is due (*saved = 1), and the
 * driver's note of the step. Stops at the first error. */
static int s_recipe_step(rl_trainer *t, void *st, const rl_recipe_loop *l, int64_t step, int *saved)
{
    rl_phase phases[RL_MAX_PHASES];
    rl_recipe_hook hooks[RL_MAX_HOOKS];
    double t0 = rl_now_s(), have;
    *saved = 0;
    rl_metric_set_clear(t->ms);
    int np = l->phases(st, step, phases);
    int rc = rl_phases_run(phases, np, st, t->ms);
    if (!rc && l->step_metrics)
        rc = l->step_metrics(st, t0);
    if (l->step_clear)
        l->step_clear(st);
    if (rc)
        return rc;
    if (rl_metric_set_get(t->ms, "timing_s/step", &have) != RL_OK) /* not put by the recipe */
        rc = rl_metric_set_put(t->ms, "timing_s/step", rl_now_s() - t0);
    if (!rc)
        rc = rl_trainer_put_cpu(t);
    int nh = l->hooks ? l->hooks(st, hooks) : 0;
    for (int i = 0; !rc && i < nh; i++)
        if (rl_trainer_due(t, step, hooks[i].every))
            rc = hooks[i].run(st);
    if (!rc)
        rc = rl_trainer_log_step(t, step);
    if (!rc && rl_trainer_due(t, step, t->save_every) && !(rc = l->save(st)))
        *saved = 1;
    if (!rc)
        rl_driver_note_step(t->d, step, rl_now_s() - t0);
    rl_trainer_cpu_mark(t);
    return rc;
}

static void s_recipe_close(rl_trainer *t, void *st, const rl_recipe_loop *l, int reopen)
{
    if (l->step_clear)
        l->step_clear(st);
    l->close(st, reopen);
    rl_trainer_close(t);
}

int rl_recipe_run(rl_driver *d, const rl_config *job, const rl_recipe_loop *loop)
{
    void *st = calloc(1, loop->state_size ? loop->state_size : 1);
    if (!st)
        return rl_error_set(RL_ENOMEM, "recipe state: out of memory");
    rl_trainer t;
    rl_recovery rec;
    memset(&t, 0, sizeof t);
    int64_t start = 0;
    int resume = 0, rc = rl_recovery_open(&rec, job);
    if (!rc && rl_config_has_section(job, &rl_trainer_ckpt_section)) {
        const rl_trainer_ckpt_config *ck = rl_config_section_get(job, &rl_trainer_ckpt_section);
        if (!ck)
            rc = rl_error_code();
        else
            resume = ck->resume;
    }
    int64_t restore = resume ? -1 : 0;
    for (;;) { /* the start, again each time it loses a worker */
        if (rc || (rc = rl_recovery_mark(&rec, d)) ||
            !(rc = s_recipe_start(d, job, &t, st, loop, restore, &start)) ||
            !rl_recovery_check(&rec, d, restore > 0 ? restore : 0))
            break;
        s_recipe_close(&t, st, loop, 1);
        rc = RL_OK; /* recovered: start again */
    }
    rec.saved_step = start;
    for (int64_t step = start + 1; !rc && step <= t.total_steps && !rl_driver_interrupted(d); step++) {
        int saved = 0;
        if (!(rc = rl_recovery_mark(&rec, d)) && !(rc = s_recipe_step(&t, st, loop, step, &saved)) &&
            saved)
            rec.saved_step = step;
        if (rc && rl_recovery_check(&rec, d, step)) {
            /* a worker was lost: from this run's newest checkpoint */
            for (restore = rec.saved_step;;) {
                s_recipe_close(&t, st, loop, 1);
                if ((rc = rl_recovery_mark(&rec, d)) ||
                    !(rc = s_recipe_start(d, job, &t, st, loop, restore, &start)) ||
                    !rl_recovery_check(&rec, d, restore))
                    break;
            }
            step = start; /* the loop goes on at start + 1 */
        }
    }
    s_recipe_close(&t, st, loop, 0);
    rl_recovery_close(&rec);
    free(st);
    return rc;
}
