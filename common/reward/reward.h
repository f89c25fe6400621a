/* common/reward/reward.h — verifiable rewards for language-model RL (RLVR).
 *
 * Purpose: pure functions (no I/O) that score a decoded response against a
 * ground-truth answer, following the semantics of verl's / EasyR1's math
 * rewards:
 *   * answer extraction: the last \boxed{…} or \fbox{…} with brace matching
 *     (nested braces; verl's "\boxed 5" form runs to '$' or the line end),
 *     GSM8K's "#### <number>" (searched in the last 300
 *     characters, ',' and '$' stripped), the last number in the text
 *     (fallback, configurable);
 *   * normalisation + equality of math answers: both sides normalised
 *     (\dfrac/\tfrac → \frac, $ and \$ removed, \left/\right removed, \text{}
 *     units stripped, spaces removed, trailing '.' removed, thousands
 *     separators removed, \frac12 → \frac{1}{2}, a plain unit word after a
 *     number ("5 cm", "12 dollars") dropped, lower case). When both sides parse as
 *     numbers (integer, decimal, a/b, \frac{a}{b}, signs, mixed numbers
 *     "7 3/4" and "3\frac{1}{2}") they are compared as
 *     numbers: two integers exactly, anything else with a relative tolerance
 *     of 1e-6 (so \frac{1}{2} equals 0.5 and 1,000 equals 1000, but two large
 *     integers that differ by one never compare equal). Tuples and intervals
 *     with the same brackets compare element by element the same way
 *     ("(1, \frac{1}{2})" equals "(1,0.5)"). Otherwise the normalised strings
 *     must be equal. There is no symbolic (sympy-like) equivalence;
 *   * arithmetic exact match: the integer inside the last \boxed{};
 *   * format reward: 1.0 iff the response, after removing whitespace around
 *     '<', '>' and '/' (as EasyR1 does), fully matches
 *     `<think>.*</think>.*\boxed\{.*\}.*` with DOTALL semantics;
 *   * overall = (1 − format_weight)·accuracy + format_weight·format + extra.
 *
 * Dispatch by data_source (case-insensitive):
 *   "arith", "arithmetic"                      → RL_VERIFIER_ARITH
 *   "gsm8k", "openai/gsm8k"                    → RL_VERIFIER_GSM8K
 *       (#### first, then the last \boxed{}, then the last number if
 *        last_number_fallback is on)
 *   "math", "math500", "default", "lighteval/MATH",
 *   "HuggingFaceH4/MATH-500", "DigitalLearningGmbH/MATH-lighteval"
 *                                              → RL_VERIFIER_MATH
 *       (last \boxed{} + normalised equality; the last-number fallback only
 *        if math_last_number_fallback is on — off by default, as in EasyR1
 *        where an unboxed answer scores 0)
 * Any other name is RL_ENOTFOUND naming it, unless the config names a
 * default_source, whose verifier is then used.
 *
 * Invariants: accuracy and format are exactly 0.0 or 1.0. A missing answer is
 * never correct. A ground truth is itself run through the same
 * normalisation (and, for GSM8K, through "####" extraction if it carries one).
 *
 * Ownership: functions returning char * give a malloc'd string the caller
 * free()s; NULL means "no answer found" unless documented otherwise (the
 * only other NULL is an allocation failure, with RL_ENOMEM set).
 */
#ifndef RLRT_REWARD_H
#define RLRT_REWARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_verifier {
    RL_VERIFIER_ARITH = 1,
    RL_VERIFIER_GSM8K = 2,
    RL_VERIFIER_MATH = 3
} rl_verifier;

typedef struct rl_reward_config {
    double format_weight;          /* in [0, 1]; default 0.1 */
    int last_number_fallback;      /* GSM8K: last number when no #### / boxed; default 1 */
    int math_last_number_fallback; /* MATH: last number when no boxed; default 0 */
    const char *default_source;    /* borrowed; NULL: unknown data_source is an error */
} rl_reward_config;

typedef struct rl_reward_result {
    double score;    /* overall */
    double accuracy; /* 0 or 1 */
    double format;   /* 0 or 1 */
} rl_reward_result;

void rl_reward_config_default(rl_reward_config *cfg);

/* ---- extraction ------------------------------------------------------------ */

/* Finds the last answer marker — "\boxed{", "\fbox{" or verl's space form
 * "\boxed 5" (content up to the next '$' or line end) — and the content of
 * its balanced braces. *start / *len receive the content's offset and length
 * in `text` (braces excluded). Returns 1 if found, 0 if none (or if the last
 * one is unterminated, e.g. a truncated response). */
int rl_reward_find_boxed(const char *text, size_t *start, size_t *len);
/* The content of the last \boxed{} (whitespace-trimmed), or NULL. */
char *rl_reward_extract_boxed(const char *text);
/* The number after the last "#### " in the last 300 characters, with ','
 * and '$' removed ("#### $1,234" → "1234"), or NULL. */
char *rl_reward_extract_gsm8k(const char *text);
/* The last number in the text (optional '-', digits with ',' groups, optional
 * decimals), commas removed ("… is 1,234." → "1234"), or NULL. */
char *rl_reward_extract_last_number(const char *text);

/* ---- normalisation and equality ------------------------------------------- */

/* The normalised form of an answer (see the top comment); never NULL except
 * on allocation failure. "" for an empty answer. */
char *rl_reward_normalize(const char *answer);
/* Parses a NORMALISED answer as a number. Returns 1 and sets *value (and
 * *is_int = 1 for a plain integer) if it is one of: [sign] digits [. digits],
 * [sign] .digits, a/b of those, [sign] \frac{a}{b} of those (b ≠ 0), a
 * mixed number [sign] w+a/b or [sign] w\frac{a}{b} (normalisation writes
 * "7 3/4" as "7+3/4"); else 0. */
int rl_reward_parse_number(const char *normalized, double *value, int *is_int);
/* 1 if the two answers are equal after normalisation (numerically when both
 * are numbers), else 0. An empty answer equals nothing. */
int rl_reward_answers_equal(const char *a, const char *b);

/* ---- verifiers ---------------------------------------------------------------- */

/* 1.0 / 0.0: EasyR1's format reward (see the top comment). */
double rl_reward_format(const char *response);
/* Arithmetic exact match: *correct = 1 iff the last \boxed{} holds an integer
 * equal to ground_truth. RL_EINVAL if ground_truth is not an integer. */
int rl_reward_arith_match(const char *response, const char *ground_truth, int *correct);
/* Maps a data_source to its verifier (see the dispatch table above). */
int rl_reward_verifier_for(const rl_reward_config *cfg, const char *data_source,
                           rl_verifier *out);
/* *correct = 1 iff the response answers ground_truth under verifier v. */
int rl_reward_accuracy(const rl_reward_config *cfg, rl_verifier v, const char *response,
                       const char *ground_truth, int *correct);
/* (1 − format_weight)·accuracy + format_weight·format + extra. */
double rl_reward_overall(double accuracy, double format, double format_weight, double extra);
/* All of it for one row: dispatch, accuracy, format, overall (with extra). */
int rl_reward_score(const rl_reward_config *cfg, const char *data_source, const char *response,
                    const char *ground_truth, double extra, rl_reward_result *out);

#ifdef __cplusplus
}
#endif
#endif
