/* fmnist.c — the Fashion-MNIST data section (common/schema/fmnist.h). */
#include "common/schema/fmnist.h"

#define RL_CFG_DEFINE rl_fmnist_data_section, rl_fmnist_data_config, "common/schema/fmnist_data.def", NULL, \
    "data (Fashion-MNIST)", "The images the diffusion track pretrains on.", \
    "the driver (scorer_train, flow_pretrain)"
#include "common/schema/section.inc"
