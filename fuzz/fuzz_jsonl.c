/* fuzz_jsonl.c — libFuzzer target for JSONL datasets
 * (rl_dataset_load_jsonl, common/data/dataset.c). One input is one .jsonl
 * file. Oracle: every row of an accepted dataset has a prompt, a ground
 * truth and a line number within the file. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz/fuzz_memfile.h"
#include "common/data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = rl_fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    rl_dataset *ds = rl_dataset_load_jsonl(path);
    if (ds) {
        for (int64_t r = 0; r < rl_dataset_size(ds); r++)
            if (!rl_dataset_prompt(ds, r) || !rl_dataset_ground_truth(ds, r) ||
                rl_dataset_line(ds, r) < 1 || !rl_dataset_extra(ds, r))
                abort();
        rl_dataset_free(ds);
    }
    close(fd);
    return 0;
}
