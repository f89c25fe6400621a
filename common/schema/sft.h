/* common/schema/sft.h — the sft recipe's own section (driver/recipes/lm/sft.c)
 * and the defaults it changes. */
#ifndef RLRT_SCHEMA_SFT_H
#define RLRT_SCHEMA_SFT_H

#include <stddef.h>

#include "rlrt/config.h"

#define RL_SFT_KEYS(X)                                                                              \
    X(NUM, stop_at_val_accuracy, "trainer.stop_at_val_accuracy", "0.0", 0, 1, 0, NULL,              \
      "end at the first validation whose accuracy reaches this, and save final there (0: run "     \
      "every step; needs trainer.val_every)")

typedef struct rl_sft_config {
    RL_SFT_KEYS(RL_CFG_FIELD)
} rl_sft_config;

extern const rl_config_section rl_sft_section;

/* The defaults sft changes ({NULL, NULL}-terminated). */
extern const rl_config_default rl_sft_changes[];

#endif
