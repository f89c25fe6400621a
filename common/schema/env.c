/* env.c — the env section and its layout (common/schema/env.h). */
#include "common/schema/env.h"

#include <stdlib.h>

#include "common/schema/trainer.h"
#include "rlrt/error.h"

/* "0-9" or "0,3,7-8" into tasks[]; 0, or -1 for text that is not a list
 * of task numbers in [0, RL_ENV_MAX_TASKS). */
static int s_parse_tasks(const char *s, int *tasks, int *n)
{
    *n = 0;
    while (s && *s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0 || a >= RL_ENV_MAX_TASKS)
            return -1;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a || b >= RL_ENV_MAX_TASKS)
                return -1;
            s = end;
        }
        for (long k = a; k <= b; k++) {
            if (*n >= RL_ENV_MAX_TASKS)
                return -1;
            tasks[(*n)++] = (int)k;
        }
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return *n > 0 ? 0 : -1;
}

#define S_ERR(c, field, ...) RL_CFG_ERROR(c, &rl_env_section, rl_env_config, field, RL_ECONFIG, __VA_ARGS__)
#define S_PATH(field) RL_CFG_PATH(&rl_env_section, rl_env_config, field)
/* a check between two of its keys: at the one the user wrote */
#define S_ERR2(c, fa, fb, ...) \
    RL_CFG_ERROR2(c, &rl_env_section, rl_env_config, fa, &rl_env_section, rl_env_config, fb, RL_ECONFIG, \
                  __VA_ARGS__)

static int s_check(const rl_config *c, void *out)
{
    rl_env_config *o = out;
    if (s_parse_tasks(o->task_ids, o->tasks, &o->num_tasks))
        return S_ERR(c, task_ids, "expected task numbers in [0, %d) like '0-9' or '0,3,7', got '%s'",
                     RL_ENV_MAX_TASKS, o->task_ids);
    if (o->total_num_envs % o->group_size)
        return S_ERR2(c, group_size, total_num_envs, "must divide %s (%lld), got %s %lld",
                      S_PATH(total_num_envs), (long long)o->total_num_envs, S_PATH(group_size),
                      (long long)o->group_size);
    if (o->group_size > 1 && (o->total_num_envs / o->group_size) % o->num_tasks) {
        const char *const keys[] = {S_PATH(group_size), S_PATH(total_num_envs), S_PATH(task_ids), NULL};
        return rl_config_error_among(c, keys, RL_ECONFIG,
                                     "%lld envs (%s) in groups of %lld (%s) make %lld groups: a "
                                     "multiple of the %d tasks (%s) is needed, so every task has as "
                                     "many groups",
                                     (long long)o->total_num_envs, keys[1], (long long)o->group_size,
                                     keys[0], (long long)(o->total_num_envs / o->group_size),
                                     o->num_tasks, keys[2]);
    }
    if (o->pipeline_stage_num > o->total_num_envs)
        return S_ERR2(c, pipeline_stage_num, total_num_envs, "must be <= %s (%lld), got %s %lld",
                      S_PATH(total_num_envs), (long long)o->total_num_envs,
                      S_PATH(pipeline_stage_num), (long long)o->pipeline_stage_num);
    const rl_trainer_config *t = rl_config_section_get(c, &rl_trainer_section);
    if (!t)
        return rl_error_code();
    o->seed = t->seed;
    return RL_OK;
}

#define RL_CFG_DEFINE rl_env_section, rl_env_config, "common/schema/env.def", s_check, \
    "env", "The LIBERO-Object environments of the env role and their layout.", \
    "the env ranks; the rollout ranks (serve_env); the driver (LIBERO recipes)"
#include "common/schema/section.inc"

rl_env_place rl_env_place_of(const rl_env_config *c, int64_t g, int ungrouped)
{
    const int64_t G = c->group_size, n = c->num_tasks, q = g / G, groups = c->total_num_envs / G;
    rl_env_place p;
    p.slot = q % n;
    p.task = c->tasks[p.slot];
    p.k = q / n;
    p.sharing = (groups - p.slot + n - 1) / n;
    p.stream = (uint64_t)q;
    if (G > 1 && ungrouped) { /* the groups cover the tasks evenly (the check) */
        p.k = p.k * G + g % G;
        p.sharing = c->total_num_envs / n;
        p.stream = (uint64_t)g;
    }
    return p;
}
