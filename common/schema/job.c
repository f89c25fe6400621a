/* job.c — a job tree from a list of sections (common/schema/job.h). */
#include "common/schema/job.h"

#include <string.h>

#include "common/schema/trainer.h"
#include "rlrt/error.h"

rl_config *rl_schema_job(const rl_config_section *const *sections, const char *const *yaml,
                         const char *job_path, int n_overrides, const char *const *overrides)
{
    const rl_config_section *all[64];
    size_t n = 0;
    all[n++] = &rl_trainer_section;
    for (size_t i = 0; sections && sections[i]; i++) {
        if (n == sizeof all / sizeof all[0])
            return rl_error_set(RL_EINVAL, "rl_schema_job: more than %zu sections", n - 1), NULL;
        all[n++] = sections[i];
    }
    rl_config *known = rl_config_schema_defaults(all, n, NULL, 0);
    for (size_t i = 0; known && yaml && yaml[i]; i++) {
        rl_config *own = rl_config_parse_string(yaml[i], strlen(yaml[i]), "<defaults>");
        rl_config *next = own ? rl_config_merge(known, own) : NULL;
        rl_config_free(own);
        rl_config_free(known);
        known = next;
    }
    rl_config *job = known ? rl_config_load_job_tree(known, job_path, n_overrides, overrides) : NULL;
    rl_config_free(known);
    return job;
}

int rl_schema_optional(const rl_config *c, const rl_config_section *s, const void **out)
{
    *out = rl_config_has_section(c, s) ? rl_config_section_get(c, s) : NULL;
    return *out || !rl_config_has_section(c, s) ? RL_OK : rl_error_code();
}
