/* recipes.c — the recipe table of rl-driver and a recipe's known keys
 * (driver/recipe.h). */
#include "driver/recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/schema/sections.h"
#include "common/schema/trainer.h"
#include "rlrt/error.h"

const rl_recipe *const rl_recipes[] = {
    &rl_recipe_selftest,       &rl_recipe_sft,           &rl_recipe_rlvr,
    &rl_recipe_scorer_train,   &rl_recipe_flow_pretrain, &rl_recipe_diffusion,
    &rl_recipe_libero_collect, &rl_recipe_flow_warmstart, &rl_recipe_libero_rl,
    NULL,
};

const rl_recipe *rl_recipe_find(const char *name)
{
    for (size_t i = 0; name && rl_recipes[i]; i++)
        if (strcmp(rl_recipes[i]->name, name) == 0)
            return rl_recipes[i];
    return NULL;
}

/* rl_trainer_section, then the recipe's sections. */
static size_t s_sections(const rl_recipe *r, const rl_config_section **out, size_t cap)
{
    size_t n = 0;
    out[n++] = &rl_trainer_section;
    for (size_t i = 0; r->sections && r->sections[i] && n < cap; i++)
        out[n++] = r->sections[i];
    return n;
}

rl_config *rl_recipe_known_keys(const rl_recipe *r)
{
    const rl_config_section *secs[64];
    size_t n = s_sections(r, secs, 64), n_changes = 0;
    while (r->changes && r->changes[n_changes].path)
        n_changes++;
    rl_config *known = rl_config_schema_defaults(secs, n, r->changes, n_changes);
    if (!known)
        return rl_error_wrap(rl_error_code(), "recipe %s", r->name), NULL;
    return known;
}

char *rl_recipes_config_doc(void)
{
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    if (!out)
        return rl_error_set(RL_ENOMEM, "config doc: out of memory"), NULL;
#define S_PUT(...)                                                                                 \
    do {                                                                                           \
        int k_ = snprintf(out + len, cap - len, __VA_ARGS__);                                      \
        if (k_ < 0 || (size_t)k_ >= cap - len) {                                                   \
            free(out);                                                                             \
            return rl_error_set(RL_ENOMEM, "config doc: too long"), NULL;                          \
        }                                                                                          \
        len += (size_t)k_;                                                                         \
    } while (0)
    S_PUT("# Configuration\n\n"
          "Every key a job may set, generated from the schemas in `common/schema/` by\n"
          "`rl-driver config-doc` (`make config-doc`; `tests/integration/config_doc.sh` checks\n"
          "that this file is current). A job file names its recipe (`%s`); the\n"
          "recipe's sections are its known keys: any other key is an error with file:line and\n"
          "the nearest known key. `key=value` on the command line overrides a key.\n\n"
          "## Recipes and their sections\n\n"
          "| recipe | sections | defaults it changes |\n|---|---|---|\n",
          RL_CFG_PATH(&rl_trainer_section, rl_trainer_config, recipe));
    for (size_t i = 0; rl_recipes[i]; i++) {
        const rl_recipe *r = rl_recipes[i];
        const rl_config_section *secs[64];
        size_t n = s_sections(r, secs, 64);
        S_PUT("| `%s` | ", r->name);
        for (size_t k = 0; k < n; k++)
            S_PUT("%s%s", k ? ", " : "", secs[k]->name);
        S_PUT(" | ");
        for (size_t k = 0; r->changes && r->changes[k].path; k++)
            S_PUT("%s`%s: %s`", k ? ", " : "", r->changes[k].path, r->changes[k].value);
        S_PUT(" |\n");
    }
    S_PUT("\n");
#undef S_PUT
    size_t n = 0;
    while (rl_schema_sections[n])
        n++;
    char *tables = rl_config_sections_markdown(rl_schema_sections, n);
    if (!tables) {
        free(out);
        return NULL;
    }
    size_t tl = strlen(tables);
    char *all = realloc(out, len + tl + 1);
    if (!all) {
        free(out);
        free(tables);
        return rl_error_set(RL_ENOMEM, "config doc: out of memory"), NULL;
    }
    memcpy(all + len, tables, tl + 1);
    free(tables);
    return all;
}
