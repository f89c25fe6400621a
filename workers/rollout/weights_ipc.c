/* workers/rollout/weights_ipc.c — a rollout rank's side of the same-GPU
 * weight transport (docs/decisions/gpu-weight-transport.md): when the
 * driver's sync_weights names RL_ROLLOUT_IPC_ENDPOINT (actor rank 0 is on
 * this rank's GPU), the version arrives over CUDA IPC
 * (rlrt/runtime/channel_ipc.h) into the receiver's own device buffers and
 * is copied device-to-device into the model's parameters once it is whole
 * (a model on the CPU gets a host copy). Non-finite weights are refused
 * and the model kept, as on the ZeroMQ path: on the device the check is
 * the sum of squares of the buffer (one kernel), finite or not.
 *
 * Partial rollouts: rl_rollout_weights_ipc_poll, between two decode steps,
 * handles the buckets that have arrived without waiting and switches a
 * newer complete version in, as the ZeroMQ path's poll does
 * (docs/decisions/partial-rollouts.md); sync_weights then finds the version
 * in the model and does not copy it again.
 *
 * One receiver per process (a rollout worker holds one model), remade when
 * the endpoint, the kind or the parameter count changes; freed at exit by
 * the OS.
 */
#include "common/nn/engine/device.h"
#include "common/nn/models/model_device.h"
#include "rlrt/error.h"
#include "rlrt/runtime/channel_ipc.h"
#include "workers/rollout/weights_ipc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rl_weight_ipc_receiver *s_recv;
static rl_weight_ipc_kind s_kind;
static char s_endpoint[400];
static int64_t s_count;

int rl_rollout_weights_ipc_open(void)
{
    return s_recv != NULL;
}

/* The receiver's active version v into m's parameters (device-to-device
 * for a CUDA model; a host model gets a host copy), refused when not
 * finite. */
static int s_apply(int rank, rl_model *m, uint64_t v)
{
    int64_t P = rl_model_num_params(m);
    const float *act = rl_weight_ipc_recv_active(s_recv, NULL);
    size_t bytes = sizeof(float) * (size_t)P;
    int rc;
    if (s_kind == RL_WEIGHT_IPC_CUDA && rl_model_device(m) == RL_DEVICE_CUDA) {
        const rl_nn_ops *ops = rl_nn_ops_get(RL_DEVICE_CUDA);
        double ss = ops ? ops->grad_sumsq(act, P) : NAN;
        if ((rc = rl_device_sync(RL_DEVICE_CUDA)))
            return rc;
        if (!isfinite(ss))
            return rl_error_set(RL_ENUMERIC, "rollout/%d: weights v%llu from the actor (CUDA IPC) are not "
                                "finite (sum of squares %g): the model keeps its weights", rank,
                                (unsigned long long)v, ss);
        rc = rl_device_copy(RL_DEVICE_CUDA, rl_model_params(m), RL_DEVICE_CUDA, act, bytes);
        if (!rc)
            rc = rl_device_sync(RL_DEVICE_CUDA);
    } else {
        float *h = malloc(bytes ? bytes : 1);
        if (!h)
            return rl_error_set(RL_ENOMEM, "rollout/%d: out of memory", rank);
        char what[64];
        snprintf(what, sizeof what, "weights v%llu from the actor", (unsigned long long)v);
        rc = rl_weight_ipc_copy(s_kind, h, act, bytes, RL_WEIGHT_IPC_D2H);
        if (!rc)
            rc = rl_model_check_finite(m, h, what);
        if (!rc)
            rc = rl_model_params_set(m, h);
        free(h);
    }
    if (rc)
        return rl_error_wrap(rc, "rollout/%d: weights v%llu (%s) to the model", rank, (unsigned long long)v,
                             rl_weight_ipc_kind_name(s_kind));
    return RL_OK;
}

int rl_rollout_weights_ipc(int rank, rl_model *m, const char *endpoint, rl_weight_ipc_kind kind,
                           int64_t version, uint64_t model_version, double timeout_s, uint64_t *have)
{
    int64_t P = rl_model_num_params(m);
    if (strlen(endpoint) >= sizeof s_endpoint)
        return rl_error_set(RL_EINVAL, "rollout/%d: the IPC endpoint is longer than %zu characters", rank,
                            sizeof s_endpoint - 1);
    if (s_recv && (strcmp(s_endpoint, endpoint) != 0 || s_count != P || s_kind != kind)) {
        rl_weight_ipc_receiver_free(s_recv);
        s_recv = NULL;
    }
    if (!s_recv) {
        s_recv = rl_weight_ipc_receiver_new(endpoint, kind, P);
        if (!s_recv)
            return rl_error_wrap(rl_error_code(), "rollout/%d: %s weights", rank, rl_weight_ipc_kind_name(kind));
        snprintf(s_endpoint, sizeof s_endpoint, "%s", endpoint);
        s_count = P;
        s_kind = kind;
    }
    uint64_t v = 0;
    rl_weight_ipc_recv_active(s_recv, &v);
    while (v < (uint64_t)version) {
        int rc = rl_weight_ipc_recv_poll(s_recv, (int)(timeout_s * 1000));
        if (rc)
            return rl_error_wrap(rc, "rollout/%d waiting for weights v%lld over %s", rank, (long long)version,
                                 rl_weight_ipc_kind_name(kind));
        rl_weight_ipc_recv_active(s_recv, &v);
    }
    if (v != model_version) { /* else a partial rollout's poll put it there already */
        int rc = s_apply(rank, m, v);
        if (rc)
            return rc;
    }
    *have = v;
    return RL_OK;
}

int rl_rollout_weights_ipc_poll(int rank, rl_model *m, uint64_t model_version, uint64_t *have)
{
    if (!s_recv)
        return 0;
    if (s_count != rl_model_num_params(m))
        return rl_error_set(RL_ESTATE, "rollout/%d: the IPC receiver holds %lld floats, the model %lld", rank,
                            (long long)s_count, (long long)rl_model_num_params(m));
    int rc = rl_weight_ipc_recv_poll(s_recv, 0);
    if (rc && rc != RL_ETIMEOUT)
        return rl_error_wrap(rc, "rollout/%d: weights over %s while generating", rank,
                             rl_weight_ipc_kind_name(s_kind));
    uint64_t v = 0;
    rl_weight_ipc_recv_active(s_recv, &v);
    if (v <= model_version)
        return 0;
    if ((rc = s_apply(rank, m, v)))
        return rc;
    *have = v;
    return 1;
}
