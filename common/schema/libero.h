/* common/schema/libero.h — the sections of the LIBERO recipes
 * (driver/recipes/embodied/): libero_rl's evaluation, the evaluation GIFs of
 * libero_rl and flow_warmstart, the warm start, and libero_collect; and the
 * defaults each of the three recipes changes in the sections it names. */
#ifndef RLRT_SCHEMA_LIBERO_H
#define RLRT_SCHEMA_LIBERO_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

/* libero_rl's evaluation: the ODE policy on fixed initial states */

typedef struct rl_libero_eval_config {
#define X RL_CFG_FIELD
#include "common/schema/libero_eval.def"
#undef X
} rl_libero_eval_config;

extern const rl_config_section rl_libero_eval_section;

/* GIFs of evaluation episodes (driver/recipes/embodied/libero_gif.h) */

typedef struct rl_libero_gif_config {
#define X RL_CFG_FIELD
#include "common/schema/libero_gif.def"
#undef X
} rl_libero_gif_config;

extern const rl_config_section rl_libero_gif_section;

/* flow_warmstart: few-shot SFT on demonstrations, then its evaluation */

typedef struct rl_warmstart_config {
#define X RL_CFG_FIELD
#include "common/schema/warmstart.def"
#undef X
} rl_warmstart_config;

extern const rl_config_section rl_warmstart_section;

/* libero_collect: episodes written as a demonstration dataset */

typedef struct rl_collect_config {
#define X RL_CFG_FIELD
#include "common/schema/collect.def"
#undef X
} rl_collect_config;

extern const rl_config_section rl_collect_section;

/* The defaults each recipe changes ({NULL, NULL}-terminated). */
extern const rl_config_default rl_libero_rl_changes[];
extern const rl_config_default rl_flow_warmstart_changes[];
extern const rl_config_default rl_libero_collect_changes[];

#endif
