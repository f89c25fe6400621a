/* driver/recipe.h — training loops of rl-driver, one file per recipe under
 * driver/recipes/. A job's `trainer.recipe` picks one. Each recipe brings the
 * defaults YAML that defines its known keys (overrides and job files are
 * checked against them). */
#ifndef RLRT_DRIVER_RECIPE_H
#define RLRT_DRIVER_RECIPE_H

#include "rlrt/config.h"
#include "rlrt/runtime/driver.h"

typedef struct rl_recipe {
    const char *name;
    const char *summary;
    /* The config sections the recipe's job has besides rl_trainer_section
     * (NULL-terminated; common/schema/), and the defaults of theirs it
     * changes ({NULL, NULL}-terminated; may be NULL): together the job's
     * known keys (rl_recipe_known_keys). */
    const rl_config_section *const *sections;
    const rl_config_default *changes;
    /* The cluster roles the recipe calls (NULL-terminated). rl-driver starts
     * only these and fails, naming cluster.yaml, when one is missing. NULL:
     * every role of cluster.yaml. */
    const char *const *roles;
    /* 1: workers also serve the selftest's test methods (echo, add, ...). */
    int test_methods;
    /* Optional: completes the job tree before the workers start (they get
     * it in CONFIGURE), e.g. model.vocab_size from the tokenizer. */
    int (*prepare)(rl_config *job);
    /* A training recipe's trainer loop (driver/recipes/phases.h), which
     * rl-driver runs with rl_recipe_run; or (loop NULL) `run`, the whole
     * job: 0 when the recipe succeeded, an error code (message set)
     * otherwise. Either must return promptly once rl_driver_interrupted(d). */
    const struct rl_recipe_loop *loop;
    int (*run)(rl_driver *d, const rl_config *job);
} rl_recipe;

/* Every recipe, in the order rl-driver --help lists them (NULL-terminated),
 * and the one called `name` (NULL if none). */
extern const rl_recipe *const rl_recipes[];
const rl_recipe *rl_recipe_find(const char *name);
/* The known-keys tree of a recipe's jobs: rl_trainer_section and its
 * sections, with its changes (the caller frees it). */
rl_config *rl_recipe_known_keys(const rl_recipe *r);
/* docs/CONFIG.md: every recipe's sections, then every section's keys
 * (malloc'd). */
char *rl_recipes_config_doc(void);

extern const rl_recipe rl_recipe_selftest;
extern const rl_recipe rl_recipe_sft;
extern const rl_recipe rl_recipe_rlvr;
extern const rl_recipe rl_recipe_scorer_train;
extern const rl_recipe rl_recipe_flow_pretrain;
extern const rl_recipe rl_recipe_diffusion;
extern const rl_recipe rl_recipe_libero_collect;
extern const rl_recipe rl_recipe_flow_warmstart;
extern const rl_recipe rl_recipe_libero_rl;

#endif
