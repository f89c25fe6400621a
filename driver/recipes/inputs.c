/* driver/recipes/inputs.c — the job's input paths, checked before any
 * worker starts (driver/recipes/inputs.h). */
#include "driver/recipes/inputs.h"
#include "common/nn/engine/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/reward/reward_config.h"
#include "common/schema/diffusion.h"
#include "common/schema/env.h"
#include "common/schema/flow_rl.h"
#include "common/schema/fmnist.h"
#include "common/schema/libero.h"
#include "common/schema/model.h"
#include "common/schema/reward_image.h"
#include "rlrt/error.h"

enum { S_FILE = 1, S_DIR = 2, S_MODEL = 3 }; /* S_MODEL: a directory with model.safetensors */
enum { S_DRIVER = 1, S_WORKERS = 2 };         /* who reads it */

typedef struct s_input {
    const rl_config_section *sec;
    size_t offset; /* of the key's field (a string) */
    int kind;
    int list; /* several paths, ',' between them */
    /* who reads it in this job (S_DRIVER | S_WORKERS), 0 when nobody does */
    int (*readers)(const rl_config *job);
    const char *hint; /* what makes it, or "" */
} s_input;

static int s_workers(const rl_config *job)
{
    (void)job;
    return S_WORKERS;
}

/* the LIBERO scenes: the env ranks, and the driver when it draws GIFs */
static int s_scenes(const rl_config *job)
{
    const void *gif = NULL;
    if (rl_config_has_section(job, &rl_libero_gif_section))
        gif = rl_config_section_get(job, &rl_libero_gif_section);
    return S_WORKERS | (gif && ((const rl_libero_gif_config *)gif)->per_task > 0 ? S_DRIVER : 0);
}

/* the learned scorer: only when a term of the reward uses it */
static int s_scorer(const rl_config *job)
{
    double w[RL_IMG_REWARD_COUNT];
    if (rl_image_reward_weights_from_job(job, w))
        return 0; /* the section's own check reported it */
    return w[RL_IMG_PROMPT_MATCH] != 0 || w[RL_IMG_ON_PROMPT] != 0 ? S_WORKERS : 0;
}

/* Fashion-MNIST: the driver, except in a diffusion job without the FID */
static int s_fmnist(const rl_config *job)
{
    if (!rl_config_has_section(job, &rl_diffusion_data_section))
        return S_DRIVER;
    const rl_diffusion_data_config *d = rl_config_section_get(job, &rl_diffusion_data_section);
    return d && d->fid_model[0] ? S_DRIVER : 0;
}

/* the diffusion validation's FID network: only when set */
static int s_fid(const rl_config *job)
{
    if (!rl_config_has_section(job, &rl_diffusion_data_section))
        return 0;
    const rl_diffusion_data_config *d = rl_config_section_get(job, &rl_diffusion_data_section);
    return d && d->fid_model[0] ? S_DRIVER : 0;
}

/* the demonstration anchor's dataset: only with the anchor on */
static int s_demos(const rl_config *job)
{
    const rl_flow_rl_config *o = rl_config_section_get(job, &rl_flow_rl_section);
    return o && o->demo_coef > 0 ? S_DRIVER : 0;
}

static const s_input s_inputs[] = {
    {&rl_model_base_section, offsetof(rl_model_base_config, init_from), S_MODEL, 0, s_workers, ""},
    {&rl_reward_image_section, offsetof(rl_reward_image_config, scorer_path), S_MODEL, 1, s_scorer,
     " (train it with examples/fmnist_scorer.yaml)"},
    {&rl_reward_image_section, offsetof(rl_reward_image_config, judge_path), S_MODEL, 0, s_workers, ""},
    {&rl_env_section, offsetof(rl_env_config, data_dir), S_DIR, 0, s_scenes,
     " (the LIBERO-Object scenes: make libero-data)"},
    {&rl_flow_rl_section, offsetof(rl_flow_rl_config, demos), S_FILE, 0, s_demos,
     " (collect them with examples/libero_collect.yaml)"},
    {&rl_diffusion_data_section, offsetof(rl_diffusion_data_config, fid_model), S_MODEL, 0, s_fid,
     " (train it with examples/fmnist_cnn.yaml)"},
    {&rl_fmnist_data_section, offsetof(rl_fmnist_data_config, dir), S_DIR, 0, s_fmnist,
     " (Debian's dataset-fashion-mnist)"},
};

/* "" when `path` is there as `kind` and readable, else why not. */
static const char *s_why_not(const char *path, int kind, char *buf, size_t cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return kind == S_FILE ? "no such file" : "no such directory";
        snprintf(buf, cap, "cannot be read: %s", strerror(errno));
        return buf;
    }
    if (kind == S_FILE && !S_ISREG(sb.st_mode))
        return S_ISDIR(sb.st_mode) ? "is a directory, not a file" : "is not a regular file";
    if (kind != S_FILE && !S_ISDIR(sb.st_mode))
        return "is not a directory";
    if (access(path, kind == S_FILE ? R_OK : R_OK | X_OK) != 0) {
        snprintf(buf, cap, "cannot be read: %s", strerror(errno));
        return buf;
    }
    if (kind == S_MODEL) { /* the weights: one file, or a sharded checkpoint's index */
        char file[4200];
        const char *name = RL_ST_SINGLE_FILE;
        snprintf(file, sizeof file, "%s/%s", path, name);
        if (stat(file, &sb) != 0) {
            name = RL_ST_INDEX_FILE;
            snprintf(file, sizeof file, "%s/%s", path, name);
        }
        if (stat(file, &sb) != 0 || !S_ISREG(sb.st_mode))
            return "holds no " RL_ST_SINGLE_FILE " nor " RL_ST_INDEX_FILE " (not a saved model)";
        if (access(file, R_OK) != 0) {
            snprintf(buf, cap, "%s cannot be read: %s", name, strerror(errno));
            return buf;
        }
    }
    return "";
}

/* 1 when every rank of every role in `roles` runs on a launch: local node. */
static int s_all_local(const char *const *roles, const rl_cluster *cl)
{
    if (!cl)
        return 0;
    for (size_t r = 0; roles && roles[r]; r++) {
        int ri = rl_cluster_role_index(cl, roles[r]);
        for (int p = 0; ri >= 0 && p < cl->n_placements; p++) {
            const rl_placement *pl = &cl->placements[p];
            if (pl->role == ri && cl->nodes[pl->node].launch != RL_LAUNCH_LOCAL)
                return 0;
        }
    }
    return 1;
}

static void s_append(char *buf, size_t cap, const char *key)
{
    if (!buf || !cap || strstr(buf, key))
        return;
    size_t k = strlen(buf);
    snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", key);
}

int rl_job_check_inputs(const rl_config *job, const char *const *roles, const rl_cluster *cl,
                        char *unchecked, size_t cap)
{
    if (unchecked && cap)
        unchecked[0] = '\0';
    const int local = s_all_local(roles, cl);
    for (size_t i = 0; i < sizeof s_inputs / sizeof s_inputs[0]; i++) {
        const s_input *in = &s_inputs[i];
        if (!rl_config_has_section(job, in->sec))
            continue;
        const char *key = rl_config_key_path(in->sec, in->offset);
        const char *value = NULL;
        if (rl_config_get_string_or(job, key, "", &value))
            return rl_error_code();
        int who = *value ? in->readers(job) : 0;
        if (!who)
            continue;
        if (!(who & S_DRIVER) && !local) {
            s_append(unchecked, cap, key);
            continue;
        }
        /* one path, or a list of them */
        const char *p = value;
        for (;;) {
            size_t len = in->list ? strcspn(p, ",") : strlen(p);
            char path[4096], buf[256];
            if (len >= sizeof path)
                return rl_config_error_at(job, key, RL_ECONFIG, "a path longer than %zu bytes",
                                          sizeof path - 1);
            memcpy(path, p, len);
            path[len] = '\0';
            const char *why = len ? s_why_not(path, in->kind, buf, sizeof buf) : "";
            if (*why)
                return rl_config_error_at(job, key, RL_ENOTFOUND, "%s: %s%s", path, why,
                                          strncmp(why, "no such", 7) == 0 ? in->hint : "");
            if (!in->list || !p[len])
                break;
            p += len + 1;
        }
    }
    return RL_OK;
}
