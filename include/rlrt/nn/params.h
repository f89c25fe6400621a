/* rlrt/nn/params.h — the flat parameter buffer and its manifest.
 *
 * Purpose: every model keeps all its parameters in ONE contiguous float
 * buffer; the manifest names the views into it (name, shape, offset). Gradients,
 * AdamW moments, EMA/reference copies and FSDP shards are buffers of the same
 * length and layout, so an optimiser step is one loop, weight sync is one
 * broadcast, EMA is one axpby, and a checkpoint is one safetensors file whose
 * tensor names are the view names (Hugging Face names for language models).
 *
 * Invariants: views are dense and laid out in the order they were added, with
 * no gaps: views[i].offset = Σ_{j<i} views[j].numel; total = Σ numel.
 * Names are unique. The manifest does not own any float buffer.
 *
 * Ownership: rl_param_manifest_new() returns an object the caller destroys
 * with rl_param_manifest_free(). rl_param_buffer_new() returns a zeroed,
 * 64-byte-aligned buffer freed with rl_param_buffer_free().
 */
#ifndef RLRT_NN_PARAMS_H
#define RLRT_NN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_PARAM_NAME_MAX 160
#define RL_PARAM_MAX_DIMS 8

typedef struct rl_param_view {
    char name[RL_PARAM_NAME_MAX];
    int ndim;
    int64_t shape[RL_PARAM_MAX_DIMS];
    int64_t numel;
    int64_t offset; /* in elements from the start of the flat buffer */
} rl_param_view;

typedef struct rl_param_manifest {
    rl_param_view *views;
    int count;
    int capacity;
    int64_t total; /* total elements */
} rl_param_manifest;

rl_param_manifest *rl_param_manifest_new(void);
void rl_param_manifest_free(rl_param_manifest *m);
/* Appends a view; returns its index (>= 0) or a negative rl_status
 * (RL_EEXIST for a duplicate name, RL_EINVAL for a bad shape). */
int rl_param_manifest_add(rl_param_manifest *m, const char *name, int ndim,
                          const int64_t *shape);
/* Index of the view called `name`, or -1. */
int rl_param_manifest_find(const rl_param_manifest *m, const char *name);
/* True if both manifests have the same names, shapes and offsets. */
int rl_param_manifest_equal(const rl_param_manifest *a,
                            const rl_param_manifest *b);

/* Zeroed float buffer of n elements, 64-byte aligned. NULL on failure. */
float *rl_param_buffer_new(int64_t n);
void rl_param_buffer_free(float *p);

#ifdef __cplusplus
}
#endif
#endif
