/* lm.c — the language-model track's own sections (common/schema/lm.h). */
#include "common/schema/lm.h"

#include <stdio.h>

#include "rlrt/error.h"

#define RL_CFG_DEFINE rl_lm_model_section, rl_lm_model_config, "common/schema/lm_model.def", NULL, \
    "model (lm)", "The transformer of model.type lm (Llama / Qwen2 layout).", \
    "the actor and rollout ranks (rl_model_build); the driver checks it"
#include "common/schema/section.inc"

/* data.levels: 1..RL_LM_MAX_LEVELS integers, each a level of the task. */
static int s_data_check(const rl_config *c, void *out)
{
    rl_lm_data_config *d = out;
    const rl_batch_config *b = rl_config_section_get(c, &rl_batch_section);
    if (!b)
        return rl_error_code();
    d->train_batch_size = b->train_batch_size;
    const char *key = rl_config_key_path(&rl_lm_data_section, offsetof(rl_lm_data_config, levels));
    size_t n = d->levels ? rl_config_node_len(d->levels) : 0;
    if (n == 0 || n > RL_LM_MAX_LEVELS)
        return rl_config_error_at(c, key, RL_ECONFIG, "expected 1..%d levels, got %zu",
                                  RL_LM_MAX_LEVELS, n);
    for (size_t i = 0; i < n; i++) {
        char item[96];
        int64_t v;
        snprintf(item, sizeof item, "%s[%zu]", key, i);
        if (rl_config_get_int_in(c, item, RL_LM_LEVEL_MIN, RL_LM_LEVEL_MAX, &v))
            return rl_error_code();
        d->level[i] = (int)v;
    }
    d->n_levels = (int)n;
    return 0;
}

#define RL_CFG_DEFINE rl_lm_data_section, rl_lm_data_config, "common/schema/lm_data.def", s_data_check, \
    "data (language model)", "The task's prompts: the built-in arithmetic task (generated when missing) or JSONL files, tokenized on the driver.", \
    "the driver; the rollout ranks (data.tokenizer, with multi-turn tools)"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_lm_trainer_section, rl_lm_trainer_config, "common/schema/lm_trainer.def", NULL, \
    "trainer (language model)", "What the LM recipes write besides metrics.", "the driver"
#include "common/schema/section.inc"
