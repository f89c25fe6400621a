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
    /* YAML fragments merged in this order over RL_COMMON_DEFAULTS (NULL-
     * terminated): the config sections of the roles and the model the recipe
     * uses (each from its contract header, the one place its defaults live),
     * then the recipe's own keys and the defaults it changes. Together they
     * are the job's known keys. */
    const char *const *defaults;
    /* The cluster roles the recipe calls (NULL-terminated). rl-driver starts
     * only these and fails, naming cluster.yaml, when one is missing. NULL:
     * every role of cluster.yaml. */
    const char *const *roles;
    /* 1: workers also serve the selftest's test methods (echo, add, ...). */
    int test_methods;
    /* Optional: completes the job tree before the workers start (they get
     * it in CONFIGURE), e.g. model.vocab_size from the tokenizer. */
    int (*prepare)(rl_config *job);
    /* Returns 0 when the recipe succeeded; an error code (message set)
     * otherwise. Must return promptly once rl_driver_interrupted(d). */
    int (*run)(rl_driver *d, const rl_config *job);
} rl_recipe;

extern const rl_recipe rl_recipe_selftest;
extern const rl_recipe rl_recipe_sft;
extern const rl_recipe rl_recipe_rlvr;
extern const rl_recipe rl_recipe_scorer_train;
extern const rl_recipe rl_recipe_flow_pretrain;
extern const rl_recipe rl_recipe_diffusion;
extern const rl_recipe rl_recipe_libero_collect;
extern const rl_recipe rl_recipe_flow_warmstart;
extern const rl_recipe rl_recipe_libero_rl;

/* Keys every job has; a recipe's defaults are merged over them. */
#define RL_COMMON_DEFAULTS \
    "trainer:\n" \
    "  recipe: selftest\n" \
    "  seed: 1\n" \
    "  output_dir: runs/default\n"

#endif
