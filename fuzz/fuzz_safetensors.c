/* fuzz_safetensors.c — libFuzzer target for the safetensors header parser
 * and the f32 conversions that follow it (common/nn/engine/safetensors.c).
 * Build and run: make fuzz [FUZZ_SECONDS=60]; crashes land in
 * fuzz/regressions/fuzz_safetensors/ and tests/unit/test_nn_safetensors.c
 * replays every file there. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/engine/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan flags any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    rl_safetensors *st = rl_safetensors_from_memory(buf, size, "fuzz");
    if (st) {
        for (int i = 0; i < rl_safetensors_count(st); i++) {
            const rl_st_tensor *t = rl_safetensors_tensor(st, i);
            volatile uint8_t sink = 0;
            const uint8_t *p = t->data;
            for (size_t k = 0; k < t->nbytes; k++) /* every byte claimed is readable */
                sink ^= p[k];
            (void)sink;
            if (t->numel <= (int64_t)size) {
                float *out = malloc(sizeof(float) * (size_t)(t->numel + 1));
                if (out)
                    (void)rl_safetensors_read_f32(st, i, out, t->numel);
                free(out);
            }
            (void)rl_safetensors_find(st, t->name);
        }
        (void)rl_safetensors_metadata(st, "format");
        rl_safetensors_close(st);
    }
    free(buf);
    return 0;
}
