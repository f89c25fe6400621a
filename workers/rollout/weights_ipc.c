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
 * One receiver per process (a rollout worker holds one model), remade when
 * the endpoint or the parameter count changes; freed at exit by the OS.
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
static char s_endpoint[400];
static int64_t s_count;

int rl_rollout_weights_ipc(int rank, rl_model *m, const char *endpoint, int64_t version, double timeout_s,
                           uint64_t *have)
{
    int64_t P = rl_model_num_params(m);
    if (strlen(endpoint) >= sizeof s_endpoint)
        return rl_error_set(RL_EINVAL, "rollout/%d: the IPC endpoint is longer than %zu characters", rank,
                            sizeof s_endpoint - 1);
    if (s_recv && (strcmp(s_endpoint, endpoint) != 0 || s_count != P)) {
        rl_weight_ipc_receiver_free(s_recv);
        s_recv = NULL;
    }
    if (!s_recv) {
        s_recv = rl_weight_ipc_receiver_new(endpoint, RL_WEIGHT_IPC_CUDA, P);
        if (!s_recv)
            return rl_error_wrap(rl_error_code(), "rollout/%d: CUDA IPC weights", rank);
        snprintf(s_endpoint, sizeof s_endpoint, "%s", endpoint);
        s_count = P;
    }
    uint64_t v = 0;
    rl_weight_ipc_recv_active(s_recv, &v);
    while (v < (uint64_t)version) {
        int rc = rl_weight_ipc_recv_poll(s_recv, (int)(timeout_s * 1000));
        if (rc)
            return rl_error_wrap(rc, "rollout/%d waiting for weights v%lld over CUDA IPC", rank,
                                 (long long)version);
        rl_weight_ipc_recv_active(s_recv, &v);
    }
    const float *act = rl_weight_ipc_recv_active(s_recv, NULL);
    size_t bytes = sizeof(float) * (size_t)P;
    int rc;
    if (rl_model_device(m) == RL_DEVICE_CUDA) {
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
        rc = rl_weight_ipc_copy(RL_WEIGHT_IPC_CUDA, h, act, bytes, RL_WEIGHT_IPC_D2H);
        if (!rc)
            rc = rl_model_check_finite(m, h, what);
        if (!rc)
            rc = rl_model_params_set(m, h);
        free(h);
    }
    if (rc)
        return rl_error_wrap(rc, "rollout/%d: weights v%llu (CUDA IPC) to the model", rank, (unsigned long long)v);
    *have = v;
    return RL_OK;
}
