/* test_data.c — arithmetic task generation, JSONL datasets, epoch iteration
 * and tokenizer coverage. Expected answers are recomputed independently by
 * parsing the prompt text; solution steps are re-checked one by one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/text/tokenizer.h"
#include "rlrt/dataproto.h"
#include "common/tools/tools.h"
#include "common/data/data.h"

static char s_dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/rl_test_data_XXXXXX");
    return mkdtemp(s_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void s_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", s_dir, name);
}

static void s_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Evaluates the prompt "Q: <expr>=?\nA: " with expr = a op b or a+b-c. */
static long s_eval_prompt(const char *prompt, int *n_ops)
{
    assert_true(strncmp(prompt, "Q: ", 3) == 0);
    const char *end = strstr(prompt, "=?\nA: ");
    assert_non_null(end);
    assert_string_equal(end, "=?\nA: ");
    const char *p = prompt + 3;
    char *q;
    long acc = strtol(p, &q, 10);
    assert_true(q > p);
    *n_ops = 0;
    while (q < end) {
        char op = *q++;
        long v = strtol(q, &q, 10);
        if (op == '+')
            acc += v;
        else if (op == '-')
            acc -= v;
        else if (op == '*')
            acc *= v;
        else
            fail_msg("unexpected operator '%c' in %s", op, prompt);
        (*n_ops)++;
    }
    return acc;
}

/* Checks every "x op y [+ z] = r" step of the worked solution. */
static void s_check_steps(const char *sol, const char *gt)
{
    const char *open = "<think>", *close = "</think>\\boxed{";
    assert_true(strncmp(sol, open, strlen(open)) == 0);
    const char *c = strstr(sol, close);
    assert_non_null(c);
    char tail[32];
    snprintf(tail, sizeof tail, "%s}", gt);
    assert_string_equal(c + strlen(close), tail);
    char body[96];
    size_t bl = (size_t)(c - sol) - strlen(open);
    memcpy(body, sol + strlen(open), bl);
    body[bl] = '\0';
    int steps = 0;
    for (char *tok = strtok(body, " "); tok; tok = strtok(NULL, " ")) {
        char *q;
        long acc = strtol(tok, &q, 10);
        while (*q != '=') {
            char op = *q++;
            long v = strtol(q, &q, 10);
            acc = op == '+' ? acc + v : op == '-' ? acc - v : acc * v;
        }
        long r = strtol(q + 1, &q, 10);
        assert_int_equal(*q, '\0');
        if (acc != r)
            fail_msg("wrong step '%s' in %s", tok, sol);
        steps++;
    }
    assert_true(steps >= 1);
}

static void test_arith_answers_and_steps(void **state)
{
    (void)state;
    int seen_ops[8][4] = {{0}};
    size_t max_sol = 0, max_sol5 = 0;
    for (int level = 1; level <= 7; level++) {
        for (int64_t i = 0; i < 400; i++) {
            rl_arith_item it;
            assert_int_equal(rl_arith_generate(7, i, level, &it), RL_OK);
            assert_int_equal(it.level, level);
            assert_int_equal(it.global_id, i);
            int ops;
            long want = s_eval_prompt(it.prompt, &ops);
            assert_true(want >= 0);
            char buf[32];
            snprintf(buf, sizeof buf, "%ld", want);
            assert_string_equal(it.ground_truth, buf);
            s_check_steps(it.solution, it.ground_truth);
            if (strlen(it.solution) > max_sol)
                max_sol = strlen(it.solution);
            if (level <= 5 && strlen(it.solution) > max_sol5)
                max_sol5 = strlen(it.solution);
            assert_int_equal(ops, level >= 5 ? 2 : 1);
            seen_ops[level][strchr(it.prompt, '*') ? 2 : strchr(it.prompt + 4, '-') ? 1 : 0]++;
            /* operand sizes per level */
            long a = strtol(it.prompt + 3, NULL, 10);
            if (level == 1)
                assert_true(a >= 0 && a <= 9);
            if (level == 2 || level >= 4)
                assert_true(a >= 10 && a <= 99);
            if (level == 3)
                assert_true(a >= 100 && a <= 999);
        }
    }
    assert_true(max_sol5 <= 51); /* the documented bounds */
    assert_true(max_sol <= 52);
    /* levels 2 and 3 mix + and -; level 4 is multiplication */
    assert_true(seen_ops[2][0] > 100 && seen_ops[2][1] > 100);
    assert_true(seen_ops[3][0] > 100 && seen_ops[3][1] > 100);
    assert_int_equal(seen_ops[4][2], 400);
    /* levels 6 and 7: a multiplication, then + or − */
    assert_int_equal(seen_ops[6][2] + seen_ops[7][2], 800);
    rl_arith_item it;
    assert_int_equal(rl_arith_generate(1, 0, 10, &it), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "level 10"));
}

/* Levels 8 and 9 (word problems) and the tool-calling solutions: the
 * answer follows from the numbers in the words, every solution earns the
 * reward with the format, the calculator agrees with each <result>, and the
 * extended tokenizer spells it all within the example jobs' limits. */
static void test_word_problems_and_tool_solutions(void **state)
{
    (void)state;
    rl_tokenizer *tok = rl_arith_ext_tokenizer_new();
    assert_non_null(tok);
    assert_int_equal(rl_tokenizer_token_to_id(tok, "<think>"), 3);
    assert_int_equal(rl_tokenizer_token_to_id(tok, "\\boxed{"), 5);
    assert_int_equal(rl_tokenizer_token_to_id(tok, "<call>"), 6);
    assert_int_equal(rl_tokenizer_token_to_id(tok, "</result>"), 9);
    int64_t max_p = 0, max_s = 0;
    for (int level = 1; level <= 9; level++)
        for (int64_t i = 0; i < 300; i++) {
            rl_arith_item it;
            assert_int_equal(rl_arith_generate(11, i, level, &it), RL_OK);
            int ok = 0;
            assert_true(rl_arith_score(it.solution, it.ground_truth, &ok) == 1.0 && ok);
            assert_true(rl_arith_score(it.solution_tools, it.ground_truth, &ok) == 1.0 && ok);
            /* one call per step: level 4's product; the product and the
             * sum or difference of levels 6-9, the second on the first's
             * result; each <result> is what the calculator returns */
            const char *call = strstr(it.solution_tools, "<call>calc ");
            if (level == 4 || level >= 6) {
                int calls = 0;
                int64_t prev = -1;
                for (; call; call = strstr(call, "<call>calc ")) {
                    char expr[32];
                    const char *e = strstr(call, "</call>");
                    assert_non_null(e);
                    snprintf(expr, sizeof expr, "%.*s", (int)(e - call - 11), call + 11);
                    if (calls == 1)
                        assert_int_equal(strtoll(expr, NULL, 10), prev);
                    int64_t v;
                    assert_int_equal(rl_calc_eval(expr, &v), RL_OK);
                    char want[48];
                    snprintf(want, sizeof want, "</call><result>%lld</result>", (long long)v);
                    assert_ptr_equal(strstr(e, want), e);
                    prev = v;
                    calls++;
                    call = e;
                }
                assert_int_equal(calls, level == 4 ? 1 : 2);
                assert_int_equal(prev, strtoll(it.ground_truth, NULL, 10));
            } else {
                assert_null(call);
                assert_string_equal(it.solution_tools, it.solution);
            }
            if (level >= 8) {
                long n[3];
                const char *p = it.prompt;
                for (int k = 0; k < 3; k++) {
                    while (*p && (*p < '0' || *p > '9'))
                        p++;
                    n[k] = strtol(p, (char **)&p, 10);
                }
                long want = level == 8 ? n[0] + n[1] * n[2] : n[0] * n[1] - n[2];
                assert_true(want >= 0);
                assert_int_equal(strtol(it.ground_truth, NULL, 10), want);
                const char *texts[3] = {it.prompt, it.solution, it.solution_tools};
                for (int t = 0; t < 3; t++) {
                    int32_t *ids = NULL;
                    int64_t nt = 0;
                    if (rl_tokenizer_encode(tok, texts[t], strlen(texts[t]), &ids, &nt))
                        fail_msg("encode '%s': %s", texts[t], rl_error_message());
                    free(ids);
                    if (t == 0)
                        max_p = nt > max_p ? nt : max_p;
                    else
                        max_s = nt > max_s ? nt : max_s;
                }
            }
        }
    assert_true(max_p <= 84); /* examples/arith_words_*.yaml: max_prompt_length 84 */
    assert_true(max_s <= 39); /* response_length 40 with the stop token */
    rl_tokenizer_free(tok);
}

static void test_arith_determinism(void **state)
{
    (void)state;
    int levels[] = {1, 2, 3, 4, 5};
    int count[6] = {0};
    int differ = 0;
    for (int64_t i = 0; i < 500; i++) {
        rl_arith_item a, b, c;
        assert_int_equal(rl_arith_generate_mixed(123, i, levels, 5, &a), RL_OK);
        assert_int_equal(rl_arith_generate_mixed(123, i, levels, 5, &b), RL_OK);
        assert_int_equal(rl_arith_generate_mixed(124, i, levels, 5, &c), RL_OK);
        assert_memory_equal(&a, &b, sizeof a);
        differ += strcmp(a.prompt, c.prompt) != 0;
        count[a.level]++;
    }
    for (int l = 1; l <= 5; l++)
        assert_true(count[l] > 60); /* ~100 each */
    assert_true(differ > 450);
    int only4[] = {4};
    rl_arith_item x;
    assert_int_equal(rl_arith_generate_mixed(5, 3, only4, 1, &x), RL_OK);
    assert_int_equal(x.level, 4);
}

static void test_tokenizer_coverage(void **state)
{
    (void)state;
    rl_tokenizer *tok = rl_arith_tokenizer_new();
    assert_non_null(tok);
    assert_int_equal(rl_tokenizer_vocab_size(tok), 6 + (int64_t)strlen(RL_ARITH_CHARSET));
    assert_int_equal(rl_tokenizer_special_id(tok, RL_TOK_PAD), 0);
    assert_int_equal(rl_tokenizer_special_id(tok, RL_TOK_EOS), 2);
    assert_int_equal(rl_tokenizer_token_to_id(tok, "<think>"), 3);
    assert_int_equal(rl_tokenizer_token_to_id(tok, "\\boxed{"), 5);
    for (int level = 1; level <= 7; level++) {
        for (int64_t i = 0; i < 200; i++) {
            rl_arith_item it;
            assert_int_equal(rl_arith_generate(99, i, level, &it), RL_OK);
            const char *texts[2] = {it.prompt, it.solution};
            for (int t = 0; t < 2; t++) {
                int32_t *ids;
                int64_t n;
                int rc = rl_tokenizer_encode(tok, texts[t], strlen(texts[t]), &ids, &n);
                if (rc)
                    fail_msg("encode '%s': %s", texts[t], rl_error_message());
                char *back;
                size_t bl;
                assert_int_equal(rl_tokenizer_decode(tok, ids, n, &back, &bl), RL_OK);
                assert_string_equal(back, texts[t]);
                if (t == 1) { /* <think> and \boxed{ are single tokens */
                    assert_int_equal(ids[0], 3);
                    assert_true(n < (int64_t)strlen(texts[t]) - 15);
                }
                free(ids);
                free(back);
            }
        }
    }
    /* a character outside the task's set is an error (no unk) */
    int32_t *ids = NULL;
    int64_t n;
    assert_int_not_equal(rl_tokenizer_encode(tok, "Q: x", 4, &ids, &n), RL_OK);
    free(ids);
    rl_tokenizer_free(tok);
}

static void test_arith_score(void **state)
{
    (void)state;
    int ok;
    /* every generated solution earns the reward and has the format */
    for (int level = 1; level <= 7; level++)
        for (int64_t i = 0; i < 50; i++) {
            rl_arith_item it;
            assert_int_equal(rl_arith_generate(4, i, level, &it), RL_OK);
            assert_true(rl_arith_score(it.solution, it.ground_truth, &ok) == 1.0);
            assert_int_equal(ok, 1);
        }
    struct {
        const char *resp, *gt;
        double score;
        int format;
    } c[] = {
        {"<think>7+5=12 4+8+1=13</think>\\boxed{132}", "132", 1.0, 1},
        {"<think>x</think>\\boxed{132}<eos>", "132", 1.0, 1},
        {"<think>x</think>\\boxed{ 0132 }\n", "132", 1.0, 1},
        {"<think>x</think>\\boxed{133}", "132", 0.0, 1},
        {"\\boxed{132}", "132", 1.0, 0},                       /* no think */
        {"<think>\\boxed{1}</think>\\boxed{132}", "132", 1.0, 0}, /* last box counts */
        {"<think>x</think>\\boxed{132}\\boxed{7}", "132", 0.0, 0},
        {"<think>x</think>\\boxed{132", "132", 0.0, 0},        /* unclosed */
        {"<think>x</think>\\boxed{}", "0", 0.0, 1},
        {"<think>x</think>\\boxed{-5}", "-5", 1.0, 1},
        {"<think>x</think>\\boxed{1 3}", "13", 0.0, 1},
        {"<think>x</think>\\boxed{132} A", "132", 1.0, 0},      /* trailing text */
        {"132", "132", 0.0, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        double sc = rl_arith_score(c[i].resp, c[i].gt, &ok);
        if (sc != c[i].score || ok != c[i].format)
            fail_msg("case %zu '%s': score %g format %d, want %g %d", i, c[i].resp, sc, ok,
                     c[i].score, c[i].format);
    }
    assert_true(rl_arith_score(NULL, "1", NULL) == 0.0);
}

static void test_jsonl_round_trip(void **state)
{
    (void)state;
    char path[128];
    s_path(path, sizeof path, "train.jsonl");
    int levels[] = {2, 5};
    assert_int_equal(rl_arith_write_jsonl(path, 11, 50, levels, 2), RL_OK);
    rl_dataset *ds = rl_dataset_load_jsonl(path);
    assert_non_null(ds);
    assert_int_equal(rl_dataset_size(ds), 50);
    for (int64_t i = 0; i < 50; i++) {
        rl_arith_item it;
        assert_int_equal(rl_arith_generate_mixed(11, i, levels, 2, &it), RL_OK);
        assert_string_equal(rl_dataset_prompt(ds, i), it.prompt);
        assert_string_equal(rl_dataset_ground_truth(ds, i), it.ground_truth);
        assert_string_equal(rl_dataset_data_source(ds, i), "arith");
        assert_int_equal(rl_dataset_global_id(ds, i), i);
        assert_int_equal(rl_dataset_line(ds, i), i + 1);
        const json_t *ex = rl_dataset_extra(ds, i);
        assert_int_equal(json_object_size(ex), 2);
        assert_int_equal(json_integer_value(json_object_get(ex, "level")), it.level);
        assert_string_equal(json_string_value(json_object_get(ex, "solution")), it.solution);
    }
    /* into a DataProto */
    int64_t rows[3] = {4, 0, 49};
    rl_dataproto *dp = rl_dataproto_new();
    assert_int_equal(rl_dataset_fill(ds, rows, 3, dp), RL_OK);
    assert_int_equal(rl_dataset_fill_extra_i64(ds, rows, 3, "level", dp), RL_OK);
    assert_int_equal(rl_dataproto_rows(dp), 3);
    rl_column *p = rl_dataproto_column(dp, "prompt"), *g = rl_dataproto_column(dp, "global_id");
    rl_column *gt = rl_dataproto_column(dp, "ground_truth");
    rl_column *src = rl_dataproto_column(dp, "data_source"), *lv = rl_dataproto_column(dp, "level");
    assert_non_null(p);
    assert_non_null(g);
    assert_non_null(gt);
    assert_non_null(src);
    assert_non_null(lv);
    assert_int_equal(rl_column_get_type(g), RL_COL_INT64);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(rl_column_str(p, i), rl_dataset_prompt(ds, rows[i]));
        assert_string_equal(rl_column_str(gt, i), rl_dataset_ground_truth(ds, rows[i]));
        assert_string_equal(rl_column_str(src, i), "arith");
        assert_int_equal(rl_column_i64(g, i), rows[i]);
        assert_true(rl_column_i64(lv, i) == 2 || rl_column_i64(lv, i) == 5);
    }
    assert_int_equal(rl_dataset_fill_extra_i64(ds, rows, 3, "nope", dp), RL_ENOTFOUND);
    char want[200];
    snprintf(want, sizeof want, "%s:5: missing field 'nope'", path);
    assert_string_equal(rl_error_message(), want);
    rl_dataproto_free(dp);
    rl_dataset_free(ds);
}

static void test_loader_defaults(void **state)
{
    (void)state;
    char path[128];
    s_path(path, sizeof path, "generic.jsonl");
    s_write(path, "{\"prompt\": \"a\", \"ground_truth\": \"1\", \"extra_info\": {\"k\": [1,2]}}\n"
                  "\n"
                  "  {\"prompt\": \"b\", \"ground_truth\": 42, \"data_source\": \"gsm8k\"}  \r\n"
                  "{\"prompt\": \"c\", \"ground_truth\": \"x\", \"global_id\": 900}");
    rl_dataset *ds = rl_dataset_load_jsonl(path);
    if (!ds)
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_dataset_size(ds), 3);
    assert_string_equal(rl_dataset_data_source(ds, 0), "unknown");
    assert_int_equal(rl_dataset_global_id(ds, 0), 0);
    assert_int_equal(rl_dataset_global_id(ds, 1), 1);
    assert_int_equal(rl_dataset_global_id(ds, 2), 900);
    assert_int_equal(rl_dataset_line(ds, 1), 3);
    assert_string_equal(rl_dataset_ground_truth(ds, 1), "42");
    assert_string_equal(rl_dataset_data_source(ds, 1), "gsm8k");
    const json_t *k = json_object_get(json_object_get(rl_dataset_extra(ds, 0), "extra_info"), "k");
    assert_int_equal(json_array_size(k), 2);
    assert_int_equal(json_object_size(rl_dataset_extra(ds, 2)), 0);
    assert_null(rl_dataset_prompt(ds, 3));
    /* rows by global id */
    assert_int_equal(rl_dataset_row_of(ds, 900), 2);
    assert_int_equal(rl_dataset_row_of(ds, 0), 0);
    assert_int_equal(rl_dataset_row_of(ds, 1), 1);
    assert_int_equal(rl_dataset_row_of(ds, 2), -1);
    assert_int_equal(rl_dataset_row_of(ds, 901), -1);
    assert_int_equal(rl_dataset_row_of(NULL, 0), -1);
    rl_dataset_free(ds);
}

static void test_loader_errors(void **state)
{
    (void)state;
    struct {
        const char *text, *msg;
        int code;
    } cases[] = {
        {"{\"prompt\": \"a\", \"ground_truth\": \"1\"}\n{\"ground_truth\": \"1\"}\n",
         "%s:2: missing field 'prompt'", RL_ENOTFOUND},
        {"\n\n{\"prompt\": \"a\"}\n", "%s:3: missing field 'ground_truth'", RL_ENOTFOUND},
        {"{\"prompt\": 5, \"ground_truth\": \"1\"}\n",
         "%s:1: field 'prompt': expected string, got integer", RL_EDTYPE},
        {"{\"prompt\": \"a\", \"ground_truth\": [1]}\n",
         "%s:1: field 'ground_truth': expected string or integer, got array", RL_EDTYPE},
        {"{\"prompt\": \"a\", \"ground_truth\": \"1\", \"data_source\": null}\n",
         "%s:1: field 'data_source': expected string, got null", RL_EDTYPE},
        {"{\"prompt\": \"a\", \"ground_truth\": \"1\", \"global_id\": \"7\"}\n",
         "%s:1: field 'global_id': expected integer, got string", RL_EDTYPE},
        {"[1, 2]\n", "%s:1: expected a JSON object, got array", RL_EPROTO},
        {"{\"prompt\": \"a\", \"ground_truth\": \"1\", \"global_id\": 7}\n"
         "{\"prompt\": \"b\", \"ground_truth\": \"2\"}\n"
         "{\"prompt\": \"c\", \"ground_truth\": \"3\", \"global_id\": 7}\n"
         "{\"prompt\": \"d\", \"ground_truth\": \"3\", \"global_id\": 1}\n",
         "%s:3: duplicate global_id 7 (first at line 1)", RL_EEXIST},
        {"\n  \n", "%s: no rows", RL_EINVAL},
    };
    char path[128], want[256];
    s_path(path, sizeof path, "bad.jsonl");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_write(path, cases[i].text);
        assert_null(rl_dataset_load_jsonl(path));
        snprintf(want, sizeof want, cases[i].msg, path);
        assert_string_equal(rl_error_message(), want);
        assert_int_equal(rl_error_code(), cases[i].code);
    }
    /* bad JSON: the message names file:line, then jansson's text */
    s_write(path, "{\"prompt\": \"a\", \"ground_truth\": \"1\"}\n{\"prompt\": \"a\",,}\n");
    assert_null(rl_dataset_load_jsonl(path));
    snprintf(want, sizeof want, "%s:2: bad JSON: ", path);
    assert_true(strncmp(rl_error_message(), want, strlen(want)) == 0);
    assert_int_equal(rl_error_code(), RL_EPROTO);
    s_path(path, sizeof path, "missing.jsonl");
    assert_null(rl_dataset_load_jsonl(path));
    assert_int_equal(rl_error_code(), RL_ENOTFOUND);
}

static rl_dataset *s_small_dataset(int n)
{
    char path[128];
    s_path(path, sizeof path, "small.jsonl");
    int lv[] = {1};
    assert_int_equal(rl_arith_write_jsonl(path, 3, n, lv, 1), RL_OK);
    rl_dataset *ds = rl_dataset_load_jsonl(path);
    assert_non_null(ds);
    return ds;
}

static void test_epochs_shuffle_and_resume(void **state)
{
    (void)state;
    const int N = 10, B = 4, STEPS = 9;
    rl_dataset *ds = s_small_dataset(N);
    rl_data_iter *it = rl_data_iter_new(ds, 77, 1, 1);
    assert_non_null(it);
    int64_t rows[STEPS][4];
    rl_data_pos pos[STEPS + 1];
    pos[0] = rl_data_iter_tell(it);
    for (int s = 0; s < STEPS; s++) {
        int64_t n;
        assert_int_equal(rl_data_iter_next_rows(it, B, rows[s], &n), RL_OK);
        assert_int_equal(n, B);
        pos[s + 1] = rl_data_iter_tell(it);
    }
    /* drop_last: 2 batches per epoch, the 2 leftover rows skipped */
    for (int s = 0; s < STEPS; s++) {
        assert_int_equal(pos[s + 1].epoch, s / 2);
        assert_int_equal(pos[s + 1].index, (s % 2 + 1) * B);
    }
    /* each epoch: 8 distinct rows, equal to the first 8 of the permutation */
    int orders_differ = 0;
    for (int e = 0; e < 4; e++) {
        int seen[10] = {0};
        for (int k = 0; k < 2 * B; k++) {
            int64_t r = rows[2 * e + k / B][k % B];
            assert_int_equal(r, rl_data_iter_row_at(it, e, k));
            assert_int_equal(seen[r], 0);
            seen[r] = 1;
        }
        int identity = 1;
        for (int k = 0; k < N; k++)
            identity &= rl_data_iter_row_at(it, e, k) == k;
        assert_false(identity);
        if (e > 0)
            for (int k = 0; k < N; k++)
                orders_differ |= rl_data_iter_row_at(it, e, k) != rl_data_iter_row_at(it, 0, k);
    }
    assert_true(orders_differ);
    /* a resumed iterator continues with the same batches */
    for (int cut = 0; cut <= STEPS; cut++) {
        rl_data_iter *r = rl_data_iter_new(ds, 77, 1, 1);
        assert_int_equal(rl_data_iter_seek(r, pos[cut]), RL_OK);
        for (int s = cut; s < STEPS; s++) {
            int64_t got[4], n;
            assert_int_equal(rl_data_iter_next_rows(r, B, got, &n), RL_OK);
            assert_memory_equal(got, rows[s], sizeof got);
        }
        rl_data_iter_free(r);
    }
    /* another seed gives another order */
    rl_data_iter *o = rl_data_iter_new(ds, 78, 1, 1);
    int same = 1;
    for (int k = 0; k < N; k++)
        same &= rl_data_iter_row_at(o, 0, k) == rl_data_iter_row_at(it, 0, k);
    assert_false(same);
    rl_data_iter_free(o);
    rl_data_pos bad = {0, 11};
    assert_int_equal(rl_data_iter_seek(it, bad), RL_ERANGE);
    /* an epoch from a checkpoint that the next epoch would overflow */
    rl_data_pos far = {INT64_MAX, 10};
    assert_int_equal(rl_data_iter_seek(it, far), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "epoch 0..2^53"));
    int64_t tmp[16], n;
    assert_int_equal(rl_data_iter_next_rows(it, 11, tmp, &n), RL_EINVAL);
    rl_data_iter_free(it);

    /* no shuffle, keep the short last batch */
    it = rl_data_iter_new(ds, 77, 0, 0);
    int64_t want_n[] = {4, 4, 2, 4};
    int64_t first = 0;
    for (int s = 0; s < 4; s++) {
        assert_int_equal(rl_data_iter_next_rows(it, B, tmp, &n), RL_OK);
        assert_int_equal(n, want_n[s]);
        for (int k = 0; k < n; k++)
            assert_int_equal(tmp[k], (first + k) % N);
        first = (first + n) % N;
    }
    assert_int_equal(rl_data_iter_tell(it).epoch, 1);
    /* DataProto batches follow the same rows */
    rl_data_iter_free(it);
    it = rl_data_iter_new(ds, 5, 1, 1);
    rl_dataproto *dp;
    assert_int_equal(rl_data_iter_next(it, 3, &dp), RL_OK);
    assert_int_equal(rl_dataproto_rows(dp), 3);
    rl_column *g = rl_dataproto_column(dp, "global_id");
    for (int k = 0; k < 3; k++)
        assert_int_equal(rl_column_i64(g, k), rl_data_iter_row_at(it, 0, k));
    rl_dataproto_free(dp);
    rl_data_iter_free(it);
    /* a batch far larger than the dataset (its byte count overflowed size_t,
     * and the rows were copied past a 0-byte buffer): the rest of the epoch */
    it = rl_data_iter_new(ds, 5, 1, 0);
    assert_int_equal(rl_data_iter_next(it, INT64_C(1) << 61, &dp), RL_OK);
    assert_int_equal(rl_dataproto_rows(dp), N);
    rl_dataproto_free(dp);
    rl_data_iter_free(it);
    rl_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arith_answers_and_steps),
        cmocka_unit_test(test_arith_determinism),
        cmocka_unit_test(test_word_problems_and_tool_solutions),
        cmocka_unit_test(test_tokenizer_coverage),
        cmocka_unit_test(test_arith_score),
        cmocka_unit_test(test_jsonl_round_trip),
        cmocka_unit_test(test_loader_defaults),
        cmocka_unit_test(test_loader_errors),
        cmocka_unit_test(test_epochs_shuffle_and_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
