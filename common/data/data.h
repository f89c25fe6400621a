/* common/data/data.h — prompt datasets: the built-in arithmetic task and a JSONL
 * loader with deterministic, resumable epoch iteration.
 *
 * Purpose:
 *  * rl_arith_*: a verifiable-reward task for tiny character-level models.
 *    Item i of seed s is a pure function of (s, i) (Philox stream i), so a
 *    data set can be regenerated instead of stored. Levels:
 *      1  a+b          a, b in 0..9
 *      2  a+b | a-b    a, b in 10..99 (for '-', a >= b)
 *      3  a+b | a-b    a, b in 100..999 (for '-', a >= b)
 *      4  a*b          a in 10..99, b in 2..9
 *      5  a+b-c        a, b, c in 10..99, c <= a+b
 *      6  a*b+c        a, c in 10..99, b in 2..9 (two steps)
 *      7  a*b-c        a, c in 10..99, b in 2..9, c <= a*b (two steps)
 *      8  word problem  "Q: Ann has 17 cups and buys 3 bags of 6 cups. How
 *                       many cups now?\nA: " = a + b*c (a in 10..99, b, c
 *                       in 2..9; two steps, the numbers in words' order)
 *      9  word problem  "Q: Tom has 3 boxes of 6 pens and gives away 7.
 *                       How many pens are left?\nA: " = b*c - a (1 <= a <= b*c)
 *    Levels 8 and 9 need the extended tokenizer (letters, ".,?";
 *    rl_arith_ext_tokenizer_new()); their prompts are at most 80
 *    characters. Results are never negative. Prompt "Q: 47+85=?\nA: "; the worked
 *    solution (for a supervised warm start) is column arithmetic from the
 *    units up, one "x op y=z" step per column, at most 51 characters
 *    (32 tokens with the specials below) for levels 1-5 and 52 (34 tokens)
 *    for 6-7:
 *      47+85   "<think>7+5=12 4+8+1=13</think>\boxed{132}"
 *      512-347 "<think>12-7=5 10-4=6 4-3=1</think>\boxed{165}"
 *              (a borrowed column shows the digit after borrowing, +10)
 *      47*6    "<think>7*6=42 4*6+4=28</think>\boxed{282}"
 *      23+45-17 "<think>23+45=68 68-17=51</think>\boxed{51}"
 *      47*6+35 "<think>7*6=42 4*6+4=28 282+35=317</think>\boxed{317}"
 *      3+4     "<think>3+4=7</think>\boxed{7}"
 *      word 8  "<think>6*3=18 8+7=15 1+1+1=3</think>\boxed{35}"  (18+17 by columns)
 *    The tool-use variant (solution_tools, for a warm start that teaches the
 *    call format of common/tools/tools.h) hands every step of the levels with a
 *    multiplication (4, 6-9) to the calculator, one call per step, the
 *    second on the first's result, e.g. 47*6+35:
 *      "<think><call>calc 47*6</call><result>282</result><call>calc 282+35</call><result>317</result></think>\boxed{317}"
 *    (word problems: the bags' product, then the sum or difference; at most
 *    39 tokens with arith_ext; other levels: the same text as solution).
 *    Every prompt and solution uses only RL_ARITH_CHARSET plus the specials
 *    of rl_arith_tokenizer_spec().
 *  * rl_dataset: rows of a JSONL file in the verl/EasyR1 layout. "prompt"
 *    (string) is required; "ground_truth" is required (a string, or an
 *    integer which is kept as its decimal text); "data_source" (string)
 *    defaults to "unknown"; "global_id" (integer) defaults to the 0-based
 *    row index and must be unique. Every other field is kept in a per-row
 *    JSON object. Errors name "file:line" and the field.
 *  * rl_data_iter: epoch e visits the rows in the order of a Fisher-Yates
 *    shuffle driven by Philox(seed, stream = e) (or in file order without
 *    shuffle). The position (epoch, index) is all the state: saving it and
 *    seeking to it later yields the same batches as an uninterrupted run.
 *
 * Ownership: a dataset owns its strings; getters return borrowed pointers
 * valid until rl_dataset_free(). Iterators borrow the dataset (keep it alive
 * longer). DataProtos returned to the caller are new (rl_dataproto_free).
 */
#ifndef RLRT_DATA_H
#define RLRT_DATA_H

#include <jansson.h>
#include <stdint.h>

#include "rlrt/dataproto.h"
#include "common/text/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- built-in arithmetic task ------------------------------------------------ */

enum { RL_ARITH_MIN_LEVEL = 1, RL_ARITH_MAX_LEVEL = 9 };

/* Plain characters the task needs (the specials below are separate tokens). */
/* Column names of a dataset batch (rl_dataset_fill, rl_data_iter_next). */
#define RL_DATA_PROMPT "prompt"
#define RL_DATA_GROUND_TRUTH "ground_truth"
#define RL_DATA_SOURCE "data_source"
#define RL_DATA_GLOBAL_ID "global_id"

#define RL_ARITH_CHARSET "0123456789+-*=?:QA \n}"
/* The extended set (word problems, tool calls and tool output): the task's
 * characters plus letters and a little punctuation. */
#define RL_ARITH_EXT_CHARSET RL_ARITH_CHARSET "BCDEFGHIJKLMNOPRSTUVWXYZabcdefghijklmnopqrstuvwxyz.,'()/_"

typedef struct rl_arith_item {
    char prompt[96];       /* "Q: 512-347=?\nA: " */
    char ground_truth[16]; /* "165" */
    char solution[96];     /* "<think>…</think>\boxed{165}" */
    char solution_tools[128]; /* the same with the calculator (see above) */
    int level;
    int64_t global_id;     /* = index */
} rl_arith_item;

/* Item `index` (>= 0) of generator `seed` at `level` (1..5). */
int rl_arith_generate(uint64_t seed, int64_t index, int level, rl_arith_item *out);
/* Item `index` with its level drawn uniformly from levels[0..n_levels)
 * (from the item's own stream, so it does not depend on other items). */
int rl_arith_generate_mixed(uint64_t seed, int64_t index, const int *levels, int n_levels,
                            rl_arith_item *out);
/* Writes items 0..n-1 as JSONL: prompt, ground_truth, data_source "arith",
 * global_id, level, solution. Use distinct seeds for train and validation
 * files (global ids are per-file indices). */
int rl_arith_write_jsonl(const char *path, uint64_t seed, int64_t n, const int *levels,
                         int n_levels);
/* The same with tools = 1: "solution" holds solution_tools. */
int rl_arith_write_jsonl_ex(const char *path, uint64_t seed, int64_t n, const int *levels,
                            int n_levels, int tools);

/* Verifiable reward: 1.0 if the content of the LAST "\boxed{...}" in
 * `response` equals `ground_truth` as an integer (spaces around it and
 * leading zeros ignored, so "\boxed{ 0132 }" matches "132"), else 0.0.
 * *format_ok (may be NULL) is set to 1 when the response is exactly
 * "<think>…</think>\boxed{…}" with one think block and one \boxed
 * (then optional spaces/newlines and at most one "<eos>"). */
double rl_arith_score(const char *response, const char *ground_truth, int *format_ok);

/* Character tokenizer for the task: specials "<pad>", "<bos>", "<eos>",
 * "<think>", "</think>", "\boxed{" (ids 0..5), then RL_ARITH_CHARSET; no unk
 * (an unknown character is an encode error). The spec points to static
 * storage. */
void rl_arith_tokenizer_spec(rl_char_tokenizer_spec *spec);
rl_tokenizer *rl_arith_tokenizer_new(void);
/* The extended tokenizer ("arith_ext"): the same specials (same ids 0..5),
 * then "<call>", "</call>", "<result>", "</result>" (ids 6..9), then
 * RL_ARITH_EXT_CHARSET. It spells the word problems and the tool markup. */
void rl_arith_ext_tokenizer_spec(rl_char_tokenizer_spec *spec);
rl_tokenizer *rl_arith_ext_tokenizer_new(void);
/* data.tokenizer's value: "arith", "arith_ext", or a tokenizer file
 * (rl_tokenizer_load; a Hugging Face tokenizer.json takes its special
 * tokens from the files beside it, rl_tokenizer_apply_hf_config). NULL +
 * message. */
rl_tokenizer *rl_task_tokenizer_open(const char *name);

/* ---- JSONL dataset ------------------------------------------------------------- */

typedef struct rl_dataset rl_dataset;

/* NULL + message ("path:line: missing field 'prompt'", "path:line: field
 * 'global_id': expected integer, got string", "path:line: bad JSON: …",
 * "path:line: duplicate global_id 7 (first at line 2)", "path: no rows").
 * Blank lines are skipped (they still count for line numbers). */
rl_dataset *rl_dataset_load_jsonl(const char *path);
void rl_dataset_free(rl_dataset *ds);

int64_t rl_dataset_size(const rl_dataset *ds);
/* Row getters; NULL / -1 for a row out of range. */
const char *rl_dataset_prompt(const rl_dataset *ds, int64_t row);
const char *rl_dataset_ground_truth(const rl_dataset *ds, int64_t row);
const char *rl_dataset_data_source(const rl_dataset *ds, int64_t row);
int64_t rl_dataset_global_id(const rl_dataset *ds, int64_t row);
/* The row's other fields (e.g. "level", "solution"); borrowed, never NULL
 * for a valid row (possibly an empty object). */
const json_t *rl_dataset_extra(const rl_dataset *ds, int64_t row);
/* 1-based line of the row in its file (for messages). */
int64_t rl_dataset_line(const rl_dataset *ds, int64_t row);
/* The row whose global_id is `global_id`, or -1 (ids are unique; a binary
 * search of the index the load keeps). */
int64_t rl_dataset_row_of(const rl_dataset *ds, int64_t global_id);

/* Sets rows = n on an empty `dp` (or one with rows == n) and adds string
 * columns "prompt", "ground_truth", "data_source" and int64 column
 * "global_id" for dataset rows rows[0..n). */
int rl_dataset_fill(const rl_dataset *ds, const int64_t *rows, int64_t n, rl_dataproto *dp);
/* Adds an int64 column `field` from an integer extra field (e.g. "level");
 * RL_ENOTFOUND / RL_EDTYPE naming file:line if a row lacks it. */
int rl_dataset_fill_extra_i64(const rl_dataset *ds, const int64_t *rows, int64_t n,
                              const char *field, rl_dataproto *dp);

/* ---- epoch iteration ---------------------------------------------------------------- */

typedef struct rl_data_pos {
    int64_t epoch; /* 0-based */
    int64_t index; /* next position in the epoch's order, 0..size */
} rl_data_pos;

typedef struct rl_data_iter rl_data_iter;

/* shuffle = 0 keeps file order. drop_last = 1: a batch never spans two
 * epochs; the rows left at the end of an epoch (fewer than a batch) are
 * skipped. drop_last = 0: the last batch of an epoch is shorter. */
rl_data_iter *rl_data_iter_new(const rl_dataset *ds, uint64_t seed, int shuffle, int drop_last);
void rl_data_iter_free(rl_data_iter *it);
rl_data_pos rl_data_iter_tell(const rl_data_iter *it);
/* RL_ERANGE if epoch < 0 or index outside 0..size. */
int rl_data_iter_seek(rl_data_iter *it, rl_data_pos pos);
/* The dataset row at position `index` of epoch `epoch` (the permutation). */
int64_t rl_data_iter_row_at(rl_data_iter *it, int64_t epoch, int64_t index);
/* Next batch of up to `batch` row indices into rows[0..batch); *n receives
 * the count (always batch with drop_last). RL_EINVAL if batch < 1 or, with
 * drop_last, batch > size. */
int rl_data_iter_next_rows(rl_data_iter *it, int64_t batch, int64_t *rows, int64_t *n);
/* Next batch as a new DataProto filled by rl_dataset_fill(). */
int rl_data_iter_next(rl_data_iter *it, int64_t batch, rl_dataproto **out);

#ifdef __cplusplus
}
#endif
#endif
