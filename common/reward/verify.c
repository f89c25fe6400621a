/* verify.c — verifiers (arithmetic, GSM8K, MATH), the format reward, the
 * data_source dispatch and the overall score (see common/reward/reward.h). */
#include "rlrt/error.h"
#include "common/reward/reward.h"
#include "common/reward/reward_internal.h"
#include "common/schema/reward.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void rl_reward_config_default(rl_reward_config *cfg)
{
    cfg->format_weight = 0.1;
    cfg->last_number_fallback = 1;
    cfg->math_last_number_fallback = 0;
    cfg->default_source = NULL;
}

/* ---- format ----------------------------------------------------------------- */

static int s_is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int s_is_tagch(char c)
{
    return c == '<' || c == '>' || c == '/';
}

double rl_reward_format(const char *response)
{
    if (!response)
        return 0.0;
    /* EasyR1 first removes whitespace next to '<', '>' and '/' (some models
     * write "< think >"); a whitespace run goes if either neighbour is one. */
    size_t n = strlen(response), k = 0;
    char *s = malloc(n + 1);
    if (!s)
        return 0.0;
    for (size_t i = 0; i < n;) {
        if (!s_is_ws(response[i])) {
            s[k++] = response[i++];
            continue;
        }
        size_t j = i;
        while (j < n && s_is_ws(response[j]))
            j++;
        int drop = (k > 0 && s_is_tagch(s[k - 1])) || (j < n && s_is_tagch(response[j]));
        if (!drop) {
            memcpy(s + k, response + i, j - i);
            k += j - i;
        }
        i = j;
    }
    s[k] = '\0';
    /* fullmatch of <think>.*</think>.*\boxed\{.*\}.* (DOTALL): taking the
     * earliest match of each piece leaves the most room for the next. */
    double ok = 0.0;
    if (strncmp(s, "<think>", 7) == 0) {
        const char *end_think = strstr(s + 7, "</think>");
        const char *boxed = end_think ? strstr(end_think + 8, "\\boxed{") : NULL;
        if (boxed && strchr(boxed + 7, '}'))
            ok = 1.0;
    }
    free(s);
    return ok;
}

/* ---- arithmetic ------------------------------------------------------------------ */

/* Trimmed [sign] digits → canonical text in out (cap ≥ strlen(s)+1); 1 if
 * s is an integer. */
static int s_integer(const char *s, char *out)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (i == n)
        return 0;
    for (size_t j = i; j < n; j++)
        if (!isdigit((unsigned char)s[j]))
            return 0;
    while (i + 1 < n && s[i] == '0')
        i++;
    size_t k = 0;
    if (neg && !(n - i == 1 && s[i] == '0'))
        out[k++] = '-';
    memcpy(out + k, s + i, n - i);
    out[k + n - i] = '\0';
    return 1;
}

int rl_reward_arith_match(const char *response, const char *ground_truth, int *correct)
{
    *correct = 0;
    if (!ground_truth)
        return rl_error_set(RL_EINVAL, "arith: ground_truth is NULL (expected an integer)");
    char *gt = malloc(strlen(ground_truth) + 2);
    if (!gt)
        return rl_error_set(RL_ENOMEM, "arith: out of memory");
    if (!s_integer(ground_truth, gt)) {
        free(gt);
        return rl_error_set(RL_EINVAL, "arith: ground_truth '%s' is not an integer",
                            ground_truth);
    }
    char *ans = rl_reward_extract_boxed(response);
    if (ans) {
        char *canon = malloc(strlen(ans) + 2);
        if (canon && s_integer(ans, canon))
            *correct = strcmp(canon, gt) == 0;
        free(canon);
        free(ans);
    }
    free(gt);
    return RL_OK;
}

/* ---- dispatch -------------------------------------------------------------------- */

static const struct {
    const char *name;
    rl_verifier v;
} s_sources[] = {
    {"arith", RL_VERIFIER_ARITH},
    {"arithmetic", RL_VERIFIER_ARITH},
    {"gsm8k", RL_VERIFIER_GSM8K},
    {"openai/gsm8k", RL_VERIFIER_GSM8K},
    {"math", RL_VERIFIER_MATH},
    {"math500", RL_VERIFIER_MATH},
    {"default", RL_VERIFIER_MATH},
    {"lighteval/MATH", RL_VERIFIER_MATH},
    {"HuggingFaceH4/MATH-500", RL_VERIFIER_MATH},
    {"DigitalLearningGmbH/MATH-lighteval", RL_VERIFIER_MATH},
};

static int s_lookup(const char *name, rl_verifier *out)
{
    for (size_t i = 0; i < sizeof s_sources / sizeof s_sources[0]; i++)
        if (strcasecmp(name, s_sources[i].name) == 0) {
            *out = s_sources[i].v;
            return 1;
        }
    return 0;
}

int rl_reward_verifier_for(const rl_reward_config *cfg, const char *data_source,
                           rl_verifier *out)
{
    if (!data_source)
        data_source = "";
    if (s_lookup(data_source, out))
        return RL_OK;
    if (cfg && cfg->default_source) {
        if (s_lookup(cfg->default_source, out))
            return RL_OK;
        return rl_error_set(RL_ENOTFOUND,
                            "reward: unknown data_source '%s', and the configured default "
                            "'%s' is unknown too (known: arith, gsm8k, math, math500, default)",
                            data_source, cfg->default_source);
    }
    return rl_error_set(RL_ENOTFOUND,
                        "reward: unknown data_source '%s' (known: arith, arithmetic, gsm8k, "
                        "openai/gsm8k, math, math500, default, lighteval/MATH, "
                        "HuggingFaceH4/MATH-500; or set %s)",
                        data_source, RL_CFG_PATH(&rl_reward_section, rl_reward_role_config, default_source));
}

/* ---- accuracy and score --------------------------------------------------------------- */

int rl_reward_accuracy(const rl_reward_config *cfg, rl_verifier v, const char *response,
                       const char *ground_truth, int *correct)
{
    rl_reward_config def;
    if (!cfg) {
        rl_reward_config_default(&def);
        cfg = &def;
    }
    *correct = 0;
    if (v == RL_VERIFIER_ARITH)
        return rl_reward_arith_match(response, ground_truth, correct);
    if (v != RL_VERIFIER_GSM8K && v != RL_VERIFIER_MATH)
        return rl_error_set(RL_EINVAL, "reward: unknown verifier %d", (int)v);
    if (!ground_truth)
        return rl_error_set(RL_EINVAL, "reward: ground_truth is NULL");
    char *pred = NULL, *gt = NULL;
    if (v == RL_VERIFIER_GSM8K) {
        pred = rl_reward_extract_gsm8k(response);
        if (!pred)
            pred = rl_reward_extract_boxed(response);
        if (!pred && cfg->last_number_fallback)
            pred = rl_reward_extract_last_number(response);
        /* A ground truth may be the dataset's whole solution. */
        gt = strstr(ground_truth, "####") ? rl_reward_extract_gsm8k(ground_truth) : NULL;
    } else {
        pred = rl_reward_extract_boxed(response);
        if (!pred && cfg->math_last_number_fallback)
            pred = rl_reward_extract_last_number(response);
        gt = strstr(ground_truth, "\\boxed") || strstr(ground_truth, "\\fbox")
                 ? rl_reward_extract_boxed(ground_truth)
                 : NULL;
    }
    if (pred)
        *correct = rl_reward_answers_equal(pred, gt ? gt : ground_truth);
    free(pred);
    free(gt);
    return RL_OK;
}

double rl_reward_overall(double accuracy, double format, double format_weight, double extra)
{
    return (1.0 - format_weight) * accuracy + format_weight * format + extra;
}

int rl_reward_score(const rl_reward_config *cfg, const char *data_source, const char *response,
                    const char *ground_truth, double extra, rl_reward_result *out)
{
    rl_reward_config def;
    if (!cfg) {
        rl_reward_config_default(&def);
        cfg = &def;
    }
    if (!(cfg->format_weight >= 0.0 && cfg->format_weight <= 1.0))
        return rl_error_set(RL_EINVAL, "reward: format_weight must be in [0, 1], got %g",
                            cfg->format_weight);
    rl_verifier v;
    int rc = rl_reward_verifier_for(cfg, data_source, &v);
    if (rc)
        return rc;
    int correct = 0;
    rc = rl_reward_accuracy(cfg, v, response, ground_truth, &correct);
    if (rc)
        return rc;
    out->accuracy = correct ? 1.0 : 0.0;
    out->format = rl_reward_format(response);
    out->score = rl_reward_overall(out->accuracy, out->format, cfg->format_weight, extra);
    return RL_OK;
}
