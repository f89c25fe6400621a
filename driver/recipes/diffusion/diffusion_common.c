/* diffusion_common.c — driver-side pieces of the diffusion-track recipes
 * (see diffusion_common.h). */
#include "driver/recipes/diffusion/diffusion_common.h"

#include <string.h>

#include "rlrt/error.h"

int rl_diffusion_read_sections(const rl_config *job, const rl_config_section *const *secs,
                               void *const *outs, int n)
{
    for (int i = 0; i < n; i++) {
        const void *v = rl_config_section_get(job, secs[i]);
        if (!v)
            return rl_error_code();
        memcpy(outs[i], v, secs[i]->size);
    }
    return RL_OK;
}
