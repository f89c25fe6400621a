/* diffusion_common.c — driver-side pieces of the diffusion-track recipes
 * (see diffusion_common.h). */
#include "driver/recipes/diffusion/diffusion_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "rlrt/nn/model.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"


int rl_fmnist_draw(const rl_fmnist *d, uint64_t seed, int64_t step, int64_t B, int frames,
               float *clips, int32_t *labels)
{
    rl_rng g;
    rl_rng_init(&g, seed, 0x100000000ull + (uint64_t)step);
    int64_t D = (int64_t)frames * RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    for (int64_t b = 0; b < B; b++) {
        int64_t img = (int64_t)rl_rng_below(&g, (uint64_t)d->n);
        int rc = rl_clip_build(d, img, frames, seed, (uint64_t)step * 1000003u + (uint64_t)b,
                               clips + b * D);
        if (rc)
            return rc;
        labels[b] = d->labels[img];
    }
    return RL_OK;
}
