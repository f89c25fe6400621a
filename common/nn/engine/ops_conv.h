/* common/nn/engine/ops_conv.h — CPU kernels of convolutional networks, each
 * with its backward: 2-D convolution (im2col + rl_sgemm), 2-D max pooling
 * and ReLU. The image_cnn model kind (common/nn/models/image_cnn.h) is built
 * from them.
 *
 * Layout: dense row-major NCHW (N images, C channels, H rows, W columns);
 * convolution weights (OC, C, KH, KW) and biases (OC), as PyTorch's
 * torch.nn.Conv2d, so a state dict loads unchanged. Output size of a
 * convolution: OH = (H + 2·pad − KH) / stride + 1 (likewise OW), zero
 * padding; of a pooling: OH = H / k (floor, window k, stride k, no padding,
 * as torch.nn.MaxPool2d(k)).
 *
 * Invariants (as common/nn/engine/ops.h):
 *  - Every *_backward ACCUMULATES into its gradient outputs (+=); a NULL
 *    gradient pointer skips that gradient.
 *  - Deterministic for a given thread count: images run in parallel
 *    (OpenMP) where each writes only its own rows; the weight and bias
 *    gradients are summed over the images in image order.
 *  - The convolutions allocate their im2col scratch and return RL_ENOMEM when
 *    it cannot be had; the other kernels never allocate and cannot fail.
 *    Shapes are trusted (the model layer checks them).
 *
 * Device: every kernel here is an entry of the device table
 * (common/nn/engine/device.h, after standardize), so the models call them
 * through their rl_nn_ops; the CUDA twins (common/nn/engine/cuda/ops_cuda.cu:
 * im2col + cuBLAS and col2im without atomics, as the CPU side) have run on
 * the host emulation of CUDA (tests/cuda_emu/) only, not yet on a GPU.
 */
#ifndef RLRT_NN_OPS_CONV_H
#define RLRT_NN_OPS_CONV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The geometry of one convolution. */
typedef struct rl_conv2d_shape {
    int N, C, H, W;  /* input */
    int OC, KH, KW;  /* output channels, kernel */
    int pad, stride; /* zero padding on every side; stride >= 1 */
} rl_conv2d_shape;

/* OH and OW of a convolution (<= 0: the kernel does not fit). */
int rl_conv2d_out_h(const rl_conv2d_shape *s);
int rl_conv2d_out_w(const rl_conv2d_shape *s);

/* out (N, OC, OH, OW) = conv(inp (N, C, H, W), w (OC, C, KH, KW)) + b (OC,
 * NULL: none). RL_OK or RL_ENOMEM. */
int rl_conv2d_forward(float *out, const float *inp, const float *w, const float *b,
                      const rl_conv2d_shape *s);
/* dinp (N, C, H, W) += the input gradient of Σ dout·out; dw (OC, C, KH, KW)
 * += its weight gradient; db (OC) += Σ over images and positions of dout.
 * RL_OK or RL_ENOMEM (then nothing was added). */
int rl_conv2d_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *w, const rl_conv2d_shape *s);

/* out (N, C, H/k, W/k) = the maximum of each k×k window of inp (N, C, H, W);
 * arg (same size as out) the index in inp (within its image and channel,
 * row·W + column) of the first maximum. */
void rl_maxpool2d_forward(float *out, int32_t *arg, const float *inp, int N, int C, int H, int W,
                          int k);
/* dinp (N, C, H, W) += dout (N, C, H/k, W/k) routed to each window's arg. */
void rl_maxpool2d_backward(float *dinp, const float *dout, const int32_t *arg, int N, int C, int H,
                           int W, int k);

/* out (n) = max(x, 0);  dinp += dout where x > 0. */
void rl_relu_forward(float *out, const float *inp, int64_t n);
void rl_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n);

/* The conv trunk's glue (common/nn/models/flow_conv_internal.h), planes
 * being (image, channel) pairs of hw values each:
 * plane_add: x (planes, hw) += add (planes) broadcast over each plane;
 * plane_sum: out (planes) = Σ over each plane of x, in order, in double
 * (overwrites); upsample2x_add: a (planes, h, w) += the nearest 2×
 * upsampling of s (planes, h/2, w/2); upsample2x_backward: ds (planes, h/2,
 * w/2) += the 2×2 block sums of da (planes, h, w) (h and w even). */
void rl_plane_add(float *x, const float *add, int64_t planes, int64_t hw);
void rl_plane_sum(float *out, const float *x, int64_t planes, int64_t hw);
void rl_upsample2x_add(float *a, const float *s, int64_t planes, int h, int w);
void rl_upsample2x_backward(float *ds, const float *da, int64_t planes, int h, int w);

#ifdef __cplusplus
}
#endif
#endif
