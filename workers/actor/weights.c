/* workers/actor/weights.c — actor rank 0's weight publishing over both
 * transports (docs/decisions/gpu-weight-transport.md): CUDA IPC to the
 * rollout ranks the driver found on the same GPU (cluster.yaml `gpus:`),
 * the ZeroMQ weight channel to the others, and the metrics of each sync.
 *
 * open_weights: meta RL_ACTOR_HOST [, RL_ACTOR_IPC_RECEIVERS (>= 0)] →
 * RL_ACTOR_ENDPOINT, RL_ACTOR_COUNT [, RL_ACTOR_IPC_ENDPOINT when the
 * colocated receivers can take CUDA IPC: this actor is on a GPU and CUDA
 * IPC works here; otherwise absent, and the driver sends everyone ZeroMQ].
 * publish_weights: meta RL_ACTOR_VERSION, RL_ACTOR_RECEIVERS (ZeroMQ
 * receivers, >= 0) [, RL_ACTOR_IPC_RECEIVERS] → meta RL_ACTOR_SYNC_BYTES,
 * _SYNC_S, _SYNC_GBPS, _SYNC_TRANSPORT ("cuda_ipc", "zmq" or
 * "cuda_ipc+zmq"). The IPC receivers copy from the policy's device buffer
 * itself (its cudaMalloc block), so nothing is staged on the host for
 * them; the ZeroMQ ones get the host copy as before. RL_ACTOR_BCAST_RECEIVERS
 * (rollout.weight_transport): those ranks get the version by the broadcast
 * of a communicator of their own with this rank as rank 0
 * (rlrt/runtime/weight_bcast.h: NCCL from the policy's device buffer when
 * the actor is on CUDA, else the CPU ring from the host copy); its id is
 * made at every open_weights (the driver opens at the job's start and at
 * every recovery: a new id then, so no rank reuses a communicator whose
 * peers died), and the communicator joined at the first publish (the
 * receivers join in their sync_weights) and dropped after an error (the
 * next publish joins again under the same id).
 */
#include "common/nn/engine/device.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/channel_ipc.h"
#include "workers/actor/actor_internal.h"

#include <stdio.h>
#include <time.h>

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rl_actor_weights_open(rl_actor_state *a, const rl_dataproto *in, rl_dataproto **out)
{
    const char *host = rl_dataproto_meta_str(in, RL_ACTOR_HOST, NULL);
    int64_t n_ipc, n_b;
    if (!host || rl_dataproto_meta_int(in, RL_ACTOR_IPC_RECEIVERS, 0, &n_ipc) ||
        rl_dataproto_meta_int(in, RL_ACTOR_BCAST_RECEIVERS, 0, &n_b))
        return rl_error_code();
    if (n_b < 0 || n_b > 64)
        return rl_error_set(RL_EINVAL, "argument '%s' must be in [0, 64], got %lld", RL_ACTOR_BCAST_RECEIVERS,
                            (long long)n_b);
    if (n_ipc < 0 || n_ipc > 64)
        return rl_error_set(RL_EINVAL, "argument '%s' must be in [0, 64], got %lld", RL_ACTOR_IPC_RECEIVERS,
                            (long long)n_ipc);
    char bind[300];
    snprintf(bind, sizeof bind, "tcp://%s:*", host);
    if (!a->wsend) {
        a->wsend = rl_weight_sender_new(bind, 0);
        if (!a->wsend)
            return rl_error_code();
        rl_weight_sender_set_fanout(a->wsend, a->o.weight_fanout == RL_ACTOR_FANOUT_CHAIN
                                                  ? RL_WEIGHT_FANOUT_CHAIN
                                                  : RL_WEIGHT_FANOUT_STAR);
    }
    if (n_ipc > 0 && !a->wipc) {
        if (a->dev != RL_DEVICE_CUDA)
            rl_log_info("actor/0: %lld rollout rank(s) share its GPU, but the actor runs on the %s: "
                        "weights go over ZeroMQ", (long long)n_ipc, rl_device_name(a->dev));
        else if (!rl_weight_ipc_available(RL_WEIGHT_IPC_CUDA))
            rl_log_info("actor/0: no CUDA IPC (%s): weights go over ZeroMQ", rl_error_message());
        else if (!(a->wipc = rl_weight_ipc_sender_new(bind, RL_WEIGHT_IPC_CUDA, 0, 0)))
            return rl_error_wrap(rl_error_code(), "actor/0: the CUDA IPC weight sender");
    }
    if (n_b > 0) { /* a new communicator at every open (a recovery reopens: survivors of the old one
                    * may still hold it without an error, so nobody reuses it) */
        char ep[300];
        snprintf(ep, sizeof ep, "tcp://%s", host);
        rl_weight_bcast_free(a->wbcast);
        rl_comm_destroy(a->bcomm);
        a->wbcast = NULL;
        a->bcomm = NULL;
        if (rl_comm_id_create(&a->bcast_id, ep))
            return rl_error_wrap(rl_error_code(), "actor/0: the weight broadcast's communicator id");
        a->bcast_world = 1 + (int)n_b;
    }
    json_t *m = json_pack("{s:s, s:I}", RL_ACTOR_ENDPOINT, rl_weight_sender_endpoint(a->wsend),
                          RL_ACTOR_COUNT, (json_int_t)a->P);
    if (m && n_b > 0)
        json_object_set_new(m, RL_ACTOR_BCAST_ID, json_string(rl_comm_id_string(&a->bcast_id)));
    if (m && n_ipc > 0 && a->wipc)
        json_object_set_new(m, RL_ACTOR_IPC_ENDPOINT, json_string(rl_weight_ipc_sender_endpoint(a->wipc)));
    *out = m ? rl_dataproto_new_meta(m) : NULL;
    return *out ? RL_OK : rl_error_set(RL_ENOMEM, "actor/0: out of memory");
}

int rl_actor_weights_publish(rl_actor_state *a, const rl_dataproto *in, rl_dataproto **out)
{
    int64_t version, receivers, n_ipc, n_b;
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_VERSION, 1, INT64_MAX, &version) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_RECEIVERS, 0, 1 << 20, &receivers) ||
        rl_dataproto_meta_int(in, RL_ACTOR_IPC_RECEIVERS, 0, &n_ipc) ||
        rl_dataproto_meta_int(in, RL_ACTOR_BCAST_RECEIVERS, 0, &n_b))
        return rl_error_code();
    if (n_b != 0 && n_b + 1 != a->bcast_world)
        return rl_error_set(RL_ESTATE, "actor/0: %lld broadcast receivers, but %s made a communicator for %d",
                            (long long)n_b, RL_ACTOR_WEIGHTS_OPEN, a->bcast_world - 1);
    if (n_ipc < 0 || n_ipc > 64 || receivers + n_ipc + n_b < 1)
        return rl_error_set(RL_EINVAL, "argument '%s' must be in [0, 64] with at least one receiver in all, "
                            "got %lld and %lld", RL_ACTOR_IPC_RECEIVERS, (long long)n_ipc,
                            (long long)receivers);
    if (!a->wsend)
        return rl_error_set(RL_ESTATE, "%s before %s", RL_ACTOR_PUBLISH_WEIGHTS, RL_ACTOR_WEIGHTS_OPEN);
    if (n_ipc > 0 && !a->wipc)
        return rl_error_set(RL_ESTATE, "actor/0: %lld CUDA IPC receivers, but %s gave no IPC endpoint",
                            (long long)n_ipc, RL_ACTOR_WEIGHTS_OPEN);
    int timeout_ms = (int)(a->o.comm_timeout_s * 1000);
    double t0 = s_now();
    int rc = RL_OK;
    /* the colocated ranks first: they copy on the device in milliseconds,
     * while the others wait on their sockets */
    if (n_ipc > 0 && (rc = rl_weight_ipc_send(a->wipc, (uint64_t)version, rl_model_params(a->policy), a->P,
                                              (int)n_ipc, timeout_ms)))
        return rl_error_wrap(rc, "actor/0: weights v%lld over CUDA IPC", (long long)version);
    if (n_b > 0) {
        const float *p = a->dev == RL_DEVICE_CUDA ? rl_model_params(a->policy) : rl_actor_host_params(a);
        if (!p)
            return rl_error_code();
        if (a->bcomm && rl_comm_aborted(a->bcomm)) {
            /* a recovery came since it was made: the receivers dropped their
             * ends (a send that left before the abort kept ours), so all
             * join afresh under the same id */
            rl_weight_bcast_free(a->wbcast);
            rl_comm_destroy(a->bcomm);
            a->wbcast = NULL;
            a->bcomm = NULL;
        }
        if (!a->bcomm) {
            rl_comm_options o;
            rl_comm_options_default(&o);
            o.nccl = a->dev == RL_DEVICE_CUDA;
            o.timeout_s = a->o.comm_timeout_s;
            if (!(a->bcomm = rl_comm_init_rank(&a->bcast_id, a->bcast_world, 0, &o)))
                return rl_error_wrap(rl_error_code(), "actor/0: joining the weight broadcast (%d ranks)",
                                     a->bcast_world);
            if (!(a->wbcast = rl_weight_bcast_new(a->bcomm, a->P, 0))) {
                rc = rl_error_code();
                rl_comm_destroy(a->bcomm);
                a->bcomm = NULL;
                return rl_error_wrap(rc, "actor/0: the weight broadcast");
            }
        }
        if ((rc = rl_weight_bcast_send(a->wbcast, (uint64_t)version, p))) {
            rl_weight_bcast_free(a->wbcast); /* the communicator is unusable after an error */
            rl_comm_destroy(a->bcomm);
            a->wbcast = NULL;
            a->bcomm = NULL;
            return rl_error_wrap(rc, "actor/0: weights v%lld by broadcast", (long long)version);
        }
    }
    if (receivers > 0) {
        const float *p = rl_actor_host_params(a);
        if (!p)
            return rl_error_code();
        if ((rc = rl_weight_send(a->wsend, (uint64_t)version, p, a->P, (int)receivers, timeout_ms)))
            return rc;
    }
    double dt = s_now() - t0, bytes = (double)a->P * sizeof(float);
    char transport[48];
    snprintf(transport, sizeof transport, "%s%s%s%s%s", n_ipc > 0 ? "cuda_ipc" : "",
             n_ipc > 0 && n_b > 0 ? "+" : "", n_b > 0 ? "broadcast" : "",
             (n_ipc > 0 || n_b > 0) && receivers > 0 ? "+" : "", receivers > 0 ? "zmq" : "");
    rl_log_debug("actor/0: weights v%lld: %.0f bytes in %.4f s (%.2f GB/s, %s)", (long long)version, bytes, dt,
                 dt > 0 ? bytes / dt / 1e9 : 0.0, transport);
    *out = rl_dataproto_new_meta(json_pack("{s:f, s:f, s:f, s:s}", RL_ACTOR_SYNC_BYTES, bytes, RL_ACTOR_SYNC_S,
                                           dt, RL_ACTOR_SYNC_GBPS, dt > 0 ? bytes / dt / 1e9 : 0.0,
                                           RL_ACTOR_SYNC_TRANSPORT, transport));
    return *out ? RL_OK : rl_error_set(RL_ENOMEM, "actor/0: out of memory");
}
