/* common/schema/sft.h — the sft recipe's own section (driver/recipes/lm/sft.c)
 * and the defaults it changes. */
#ifndef RLRT_SCHEMA_SFT_H
#define RLRT_SCHEMA_SFT_H

#include <stddef.h>

#include "rlrt/config.h"

typedef struct rl_sft_config {
#define X RL_CFG_FIELD
#include "common/schema/sft.def"
#undef X
} rl_sft_config;

extern const rl_config_section rl_sft_section;

/* The defaults sft changes ({NULL, NULL}-terminated). */
extern const rl_config_default rl_sft_changes[];

#endif
