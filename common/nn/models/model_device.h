/* common/nn/models/model_device.h — a model's device: where its flat
 * parameter and gradient buffers live, moving them, and host copies.
 *
 * Purpose: a role that trains on a GPU builds and loads its model on the
 * host as always, moves it with rl_model_to_device() once, and from then on
 * rl_model_params/grads are device pointers that only kernels, the
 * optimiser on the same device (rl_adamw_new_on) and these copies touch.
 * rl_model_save/load/zero_grad work on any device (they stage through the
 * host themselves).
 *
 * Invariants: a kind without a to_device op runs on the CPU only; moving it
 * elsewhere is RL_EUNSUPPORTED naming the kind. On an error the model stays
 * where it was. The kinds that move: lm, flow_policy, image_classifier,
 * image_cnn and clip_flow with either trunk; the flow kinds keep their step
 * math on the host (their headers).
 *
 * Ownership: the host arrays are the caller's, rl_model_num_params floats.
 */
#ifndef RLRT_NN_MODEL_DEVICE_H
#define RLRT_NN_MODEL_DEVICE_H

#include "common/nn/engine/device.h"
#include "rlrt/nn/model.h"

rl_device rl_model_device(const rl_model *m);
int rl_model_to_device(rl_model *m, rl_device dev);
/* All parameters to/from a host array (a memcpy on the CPU). */
int rl_model_params_get(rl_model *m, float *host);
int rl_model_params_set(rl_model *m, const float *host);

#endif
