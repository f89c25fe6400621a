/* fuzz_trainer_state.c — libFuzzer target for a checkpoint's
 * trainer_state.json (common/nn/engine/checkpoint.c: format, step, RNG states),
 * read by rl_checkpoint_is_complete as --resume does. One input is one
 * trainer_state.json, placed in a checkpoint folder beside valid, empty
 * model and optimizer files (so the parser is reached). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/nn/engine/checkpoint.h"

static char s_dir[64];

static void s_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        return;
}

static int s_put(const char *name, const uint8_t *data, size_t size)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    fclose(f);
    return w == size ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_dir[0]) {
        snprintf(s_dir, sizeof s_dir, "/tmp/rlrt-fuzz-ckpt-%d", (int)getpid());
        char cmd[128];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", s_dir);
        /* an empty but valid safetensors file: header length 8, "{}" padded */
        static const uint8_t empty_st[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
        if (system(cmd) != 0 || s_put("model.safetensors", empty_st, sizeof empty_st) ||
            s_put("optimizer.safetensors", empty_st, sizeof empty_st))
            return 0;
        atexit(s_cleanup);
    }
    if (s_put("trainer_state.json", data, size) == 0)
        (void)rl_checkpoint_is_complete(s_dir);
    return 0;
}
