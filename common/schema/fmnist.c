/* fmnist.c — the Fashion-MNIST data section (common/schema/fmnist.h). */
#include "common/schema/fmnist.h"

#define RL_CFG_STRUCT rl_fmnist_data_config
static const rl_config_key s_keys[] = {
#define X RL_CFG_KEY
#include "common/schema/fmnist_data.def"
#undef X
};
const rl_config_section rl_fmnist_data_section =
    RL_CFG_SECTION("data (Fashion-MNIST)", "The images the diffusion track pretrains on.",
                   "the driver (scorer_train, flow_pretrain)", s_keys, NULL);
#undef RL_CFG_STRUCT
