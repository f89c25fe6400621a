/* common/schema/job.h — a job tree from a list of sections, for what runs
 * roles outside a recipe: tests, benchmarks and fuzz targets that start
 * every role (workers/contracts.h: RL_ROLES_SECTIONS). A recipe's jobs come
 * from its own sections instead (rl_recipe_known_keys). And the optional
 * sections a role reads when the job has them.
 *
 * Ownership: the tree is the caller's (rl_config_free). */
#ifndef RLRT_SCHEMA_JOB_H
#define RLRT_SCHEMA_JOB_H

#include "rlrt/config.h"

/* The known keys of rl_trainer_section and `sections` (NULL-terminated),
 * with the YAML texts `yaml` (NULL-terminated, may be NULL: defaults a
 * caller changes or adds, as tests do) merged over them in order; then the job file `job_path` (NULL: none) and the overrides, as
 * rl_config_load_job_tree. NULL with a message on failure. */
rl_config *rl_schema_job(const rl_config_section *const *sections, const char *const *yaml,
                         const char *job_path, int n_overrides, const char *const *overrides);

/* An optional section (one a role reads only when the job has it):
 * RL_OK with *out NULL when the job lacks any of its keys, else the
 * section as rl_config_section_get gives it (an error: its message). */
int rl_schema_optional(const rl_config *c, const rl_config_section *s, const void **out);

#endif
