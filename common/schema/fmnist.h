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

#define RL_FMNIST_DATA_KEYS(X)                                                                      \
    X(STR, dir, "data.dir", "'" RL_FMNIST_DIR "'", 0, 0, 0, NULL,                                   \
      "the directory of Fashion-MNIST's IDX files (Debian's dataset-fashion-mnist)")                \
    X(INT, train_limit, "data.train_limit", "0", 0, 1 << 30, 0, NULL,                               \
      "use the first N training images (0: all 60000)")

typedef struct rl_fmnist_data_config {
    RL_FMNIST_DATA_KEYS(RL_CFG_FIELD)
} rl_fmnist_data_config;

extern const rl_config_section rl_fmnist_data_section;

#endif
