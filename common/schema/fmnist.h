/* common/schema/fmnist.h — the Fashion-MNIST data section of the diffusion
 * track's pretraining recipes (scorer_train, flow_pretrain): where the IDX
 * files are and how many training images to use (common/data/clips.h reads
 * them). The batch size is the track's (common/schema/diffusion.h). */
#ifndef RLRT_SCHEMA_FMNIST_H
#define RLRT_SCHEMA_FMNIST_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

/* where Debian's dataset-fashion-mnist installs the files */
#define RL_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct rl_fmnist_data_config {
#define X RL_CFG_FIELD
#include "common/schema/fmnist_data.def"
#undef X
} rl_fmnist_data_config;

extern const rl_config_section rl_fmnist_data_section;

#endif
