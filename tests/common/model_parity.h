/* tests/common/model_parity.h — the model-level parity checks of the GPU
 * tests (test_nn_flow_cuda.c, test_nn_conv_cuda.c): a model built from YAML,
 * host copies of its parameters and gradients, element and per-view
 * closeness, a fixed weighted loss over every quantity a kind returns, and
 * the forward + three AdamW steps comparison of a CPU model against the same
 * model on another device. Failures go through cmocka (fail_msg), each check
 * prints its largest distance. */
#ifndef RLRT_TESTS_MODEL_PARITY_H
#define RLRT_TESTS_MODEL_PARITY_H

#include <stdint.h>

#include "common/nn/engine/device.h"
#include "rlrt/dataproto.h"
#include "rlrt/nn/model.h"

rl_model *rl_parity_build(const char *yaml, uint64_t seed);
/* A host copy of the parameters (grads = 0) or gradients (grads = 1). */
float *rl_parity_host(rl_model *m, int grads);
void rl_parity_fill(float *x, int64_t n, uint64_t seed, float scale, float shift);
/* Every |got − want| <= atol + rtol·|want|; prints the largest distance. */
void rl_parity_close(const char *what, const float *got, const float *want, int64_t n, double atol,
                     double rtol);
/* Per view: the relative L2 distance <= 1e-4 and every element within
 * 1e-4·max|view| + 1e-3·|cpu|. */
void rl_parity_close_views(const char *what, const rl_param_manifest *man, const float *got,
                           const float *want);
/* L = Σ w·q over every quantity asked for (a fixed weight per quantity, row
 * and position): rl_model_forward_backward's loss callback. */
int rl_parity_loss(void *ctx, const rl_model_io *out, rl_model_io *grad, double *loss);
rl_tensor *rl_parity_new(rl_dataproto *dp, const char *name, rl_dtype dt, int ndim, const int64_t *shape);
/* A tensor of `from` copied into `to` under the same name. */
void rl_parity_copy_tensor(rl_dataproto *to, const rl_dataproto *from, const char *name);
/* The f32 tensor `name` of both outputs, compared. */
void rl_parity_cmp_out(const rl_dataproto *gpu, const rl_dataproto *cpu, const char *name, double atol,
                       double rtol);
/* forward's quantities `names` (NULL-terminated), then three steps of
 * forward_backward (micro-batch mb) and AdamW on `dev` against the CPU
 * model: losses, every gradient, the parameters after. */
void rl_parity_train(rl_device dev, rl_model *cpu, rl_model *gpu, const rl_dataproto *in, unsigned want,
                     int64_t mb, const char *const *names, const char *what);

/* clip_flow's sampling on `dev` against the CPU from the same input
 * (make_in() per pass, B rows of N steps), the ODE then the SDE: latents,
 * final means, grids, noise levels (exact) and log-probs; the SDE chain then
 * re-scored on a subset of its steps through rl_parity_train (micro-batch
 * mb). `what` names the model in the messages. */
void rl_parity_clip_flow_sample(rl_device dev, rl_model *cpu, rl_model *gpu, rl_dataproto *(*make_in)(void),
                                int B, int N, int64_t mb, const char *what);

#endif
