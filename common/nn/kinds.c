/* kinds.c — the model kind table (model.type) and what needs it: building a
 * model from a job, checking a job's model section, loading a saved
 * directory whatever its kind (rlrt/nn/model.h). A new kind is one line in
 * the table; the kinds themselves know nothing of it. */
#include "rlrt/nn/model.h"

#include <stdio.h>
#include <string.h>

#include "rlrt/error.h"
#include "common/schema/model.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/flow_policy.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_cnn.h"
#include "common/nn/models/lm/lm_hf.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/nn/models/model_base.h"

/* The kinds a job can name in model.type: a new model is one line here. */
static const rl_model_kind *const s_kinds[] = {
    &rl_model_kind_lm,
    &rl_model_kind_clip_flow,
    &rl_model_kind_flow_policy,
    &rl_model_kind_image_classifier,
    &rl_model_kind_image_cnn,
};
#define S_NKINDS (sizeof s_kinds / sizeof s_kinds[0])

const rl_model_kind *rl_model_kind_find(const char *type)
{
    for (size_t i = 0; i < S_NKINDS; i++)
        if (type && strcmp(s_kinds[i]->name, type) == 0)
            return s_kinds[i];
    char known[256] = "";
    for (size_t i = 0, n = 0; i < S_NKINDS && n < sizeof known; i++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", s_kinds[i]->name);
    rl_error_set(RL_ENOTFOUND, "unknown model type '%s' (known: %s)", type ? type : "(null)", known);
    return NULL;
}

/* The message of the last error, located at the job's `path` node. */
static int s_located(const rl_config *job, const char *path, int code)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    return rl_config_error_at(job, path, code, "%s", msg);
}

#define S_TYPE RL_CFG_PATH(&rl_model_base_section, rl_model_base_config, type)
#define S_INIT_FROM RL_CFG_PATH(&rl_model_base_section, rl_model_base_config, init_from)
#define S_PRECISION "model.precision"

/* The kind named by the job's model.type, or NULL with a located error. */
static const rl_model_kind *s_job_kind(const rl_config *job)
{
    const rl_model_base_config *base = rl_config_section_get(job, &rl_model_base_section);
    if (!base)
        return NULL;
    const rl_model_kind *kind = rl_model_kind_find(base->type);
    if (!kind) {
        s_located(job, S_TYPE, RL_ECONFIG);
        return NULL;
    }
    /* model.precision is a key of the kinds with bf16; for another kind a
     * value other than fp32 is refused by name, not left unread */
    const char *prec = NULL;
    if (!kind->bf16 && rl_config_has(job, S_PRECISION) &&
        (rl_config_get_string(job, S_PRECISION, &prec) || !prec || strcmp(prec, "fp32") != 0)) {
        rl_config_error_at(job, S_PRECISION, RL_EUNSUPPORTED,
                           "%s: model.type '%s' has no bf16 mode yet (fp32 only; bf16 is the lm "
                           "kind's)", prec ? prec : "this value", kind->name);
        return NULL;
    }
    return kind;
}

int rl_model_check_config(const rl_config *job)
{
    const rl_model_kind *kind = s_job_kind(job);
    if (!kind)
        return rl_error_code();
    return kind->check_config ? kind->check_config(job) : rl_model_sections_check(job, kind->sections);
}

rl_model *rl_model_build(const rl_config *job, uint64_t seed)
{
    const rl_model_kind *kind = s_job_kind(job);
    if (!kind)
        return NULL;
    const char *from = ((const rl_model_base_config *)rl_config_section_get(job, &rl_model_base_section))
                           ->init_from;
    rl_model *m = kind->from_config(job);
    if (!m)
        return NULL;
    int rc;
    if (from && *from) {
        if ((rc = rl_model_load(m, from)))
            s_located(job, S_INIT_FROM, rc);
    } else {
        rc = rl_model_init_random(m, seed);
    }
    if (rc) {
        rl_model_free(m);
        return NULL;
    }
    return m;
}

/* The known keys of a kind's model section: its sections with model.type
 * set to the kind. */
static rl_config *s_kind_defaults(const rl_model_kind *k)
{
    size_t n = 0;
    while (k->sections[n])
        n++;
    char type[128];
    snprintf(type, sizeof type, "'%s'", k->name);
    rl_config_default change = {S_TYPE, type};
    return rl_config_schema_defaults(k->sections, n, &change, 1);
}

/* A Hugging Face directory (config.json with a model_type): the lm kind's
 * defaults with the directory's architecture (rl_lm_hf_config_apply). */
static rl_config *s_hf_job(const char *dir)
{
    rl_config *job = s_kind_defaults(&rl_model_kind_lm);
    if (job && rl_lm_hf_config_apply(job, dir)) {
        rl_config_free(job);
        return NULL;
    }
    return job;
}

rl_model *rl_model_load_dir(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir ? dir : "");
    rl_config *file = rl_config_parse_file(path), *job = NULL;
    if (!file)
        return NULL;
    if (rl_config_has(file, "model_type")) {
        rl_config_free(file);
        file = s_hf_job(dir);
        if (!file)
            return NULL;
        rl_model *m = rl_model_kind_lm.from_config(file);
        int rc = m ? rl_model_load(m, dir) : rl_error_code();
        rl_config_free(file);
        if (m && rc) {
            rl_model_free(m);
            m = NULL;
        }
        return m;
    }
    /* the kind's defaults under the file, so a directory written before a
     * key existed loads with that key's default */
    const char *type0 = NULL;
    const rl_model_kind *k0 = rl_config_get_string(file, S_TYPE, &type0) ? NULL : rl_model_kind_find(type0);
    rl_config *defs = k0 ? s_kind_defaults(k0) : NULL;
    job = defs ? rl_config_merge(defs, file) : NULL;
    rl_config_free(defs);
    rl_config_free(file);
    if (!job)
        return NULL;
    rl_model *m = NULL;
    if (!rl_config_set_yaml(job, S_INIT_FROM, "''") && rl_model_check_config(job) == RL_OK) {
        const rl_model_kind *k = s_job_kind(job);
        m = k ? k->from_config(job) : NULL;
        int rc = m ? rl_model_load(m, dir) : rl_error_code();
        if (m && rc) {
            rl_model_free(m);
            m = NULL;
        }
    }
    rl_config_free(job);
    return m;
}
