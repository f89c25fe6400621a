/* workers/rollout/weights_bcast.c — a rollout rank's side of the weight
 * broadcast (workers/rollout/weights_bcast.h, docs/decisions/gpu-weight-transport.md):
 * the version arrives into the receiver's own buffers (device memory over
 * NCCL, host memory over the ring) and is copied into the model's
 * parameters once it is whole and finite. */
#include "common/nn/engine/device.h"
#include "common/nn/models/model_device.h"
#include "rlrt/error.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/runtime/weight_bcast.h"
#include "workers/rollout/weights_bcast.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static rl_comm *s_comm;
static rl_weight_bcast *s_wb;
static char s_id[RL_COMM_ID_BYTES];
static int s_rank_in, s_world;
static int64_t s_count;

static void s_drop(void)
{
    rl_weight_bcast_free(s_wb);
    rl_comm_destroy(s_comm);
    s_wb = NULL;
    s_comm = NULL;
}

int rl_rollout_weights_bcast(int rank, rl_model *m, const char *id, int comm_rank, int world, int64_t version,
                             double timeout_s, uint64_t *have)
{
    int64_t P = rl_model_num_params(m);
    int cuda = rl_model_device(m) == RL_DEVICE_CUDA;
    if (strlen(id) >= sizeof s_id || comm_rank < 1 || comm_rank >= world)
        return rl_error_set(RL_EINVAL, "rollout/%d: broadcast rank %d of %d, id of %zu characters", rank, comm_rank,
                            world, strlen(id));
    if (s_comm && (rl_comm_aborted(s_comm) || strcmp(s_id, id) != 0 || s_rank_in != comm_rank || s_world != world || s_count != P))
        s_drop();
    if (!s_comm) {
        rl_comm_id cid;
        if (rl_comm_id_parse(&cid, id))
            return rl_error_wrap(rl_error_code(), "rollout/%d: the weight broadcast's id", rank);
        rl_comm_options o;
        rl_comm_options_default(&o);
        o.nccl = cuda;
        o.timeout_s = timeout_s;
        if (!(s_comm = rl_comm_init_rank(&cid, world, comm_rank, &o)))
            return rl_error_wrap(rl_error_code(), "rollout/%d: joining the weight broadcast as %d of %d", rank,
                                 comm_rank, world);
        if (!(s_wb = rl_weight_bcast_new(s_comm, P, 0))) {
            int rc = rl_error_code();
            s_drop();
            return rl_error_wrap(rc, "rollout/%d: the weight broadcast", rank);
        }
        snprintf(s_id, sizeof s_id, "%s", id);
        s_rank_in = comm_rank;
        s_world = world;
        s_count = P;
    }
    int rc = rl_weight_bcast_recv(s_wb);
    uint64_t v = 0;
    const float *act = rc ? NULL : rl_weight_bcast_active(s_wb, &v);
    if (rc) {
        s_drop();
        return rl_error_wrap(rc, "rollout/%d waiting for weights v%lld by broadcast", rank, (long long)version);
    }
    if (v < (uint64_t)version)
        return rl_error_set(RL_EPROTO, "rollout/%d: the broadcast brought weights v%llu, sync_weights asked for v%lld",
                            rank, (unsigned long long)v, (long long)version);
    size_t bytes = sizeof(float) * (size_t)P;
    char what[64];
    snprintf(what, sizeof what, "weights v%llu from the actor", (unsigned long long)v);
    if (cuda) {
        const rl_nn_ops *ops = rl_nn_ops_get(RL_DEVICE_CUDA);
        double ss = ops ? ops->grad_sumsq(act, P) : NAN;
        if ((rc = rl_device_sync(RL_DEVICE_CUDA)))
            return rc;
        if (!isfinite(ss))
            return rl_error_set(RL_ENUMERIC, "rollout/%d: %s (broadcast) are not finite (sum of squares %g): the "
                                "model keeps its weights", rank, what, ss);
        rc = rl_device_copy(RL_DEVICE_CUDA, rl_model_params(m), RL_DEVICE_CUDA, act, bytes);
        if (!rc)
            rc = rl_device_sync(RL_DEVICE_CUDA);
    } else {
        rc = rl_model_check_finite(m, act, what);
        if (!rc)
            rc = rl_model_params_set(m, act);
    }
    if (rc)
        return rl_error_wrap(rc, "rollout/%d: %s (broadcast) to the model", rank, what);
    *have = v;
    return RL_OK;
}
