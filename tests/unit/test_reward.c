/* test_reward.c — verifiable rewards (rlrt/reward.h): extraction, normalised
 * equality, verifiers per data_source, the format reward and the overall
 * formula. Every expected value is derived by hand from the rules stated in
 * rlrt/reward.h (which follow verl's / EasyR1's math rewards). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/rlrt.h"

static void s_expect_str(char *got, const char *want)
{
    if (!want) {
        if (got)
            fail_msg("expected no answer, got '%s'", got);
        return;
    }
    if (!got)
        fail_msg("expected '%s', got no answer", want);
    if (strcmp(got, want) != 0)
        fail_msg("expected '%s', got '%s'", want, got);
    free(got);
}

/* ---- extraction ---------------------------------------------------------------- */

static void test_boxed_extraction(void **state)
{
    (void)state;
    s_expect_str(rl_reward_extract_boxed("so \\boxed{\\frac{1}{2}}."), "\\frac{1}{2}");
    s_expect_str(rl_reward_extract_boxed("\\boxed{a{b{c}}d} end"), "a{b{c}}d");
    /* two answers: the last one counts */
    s_expect_str(rl_reward_extract_boxed("\\boxed{3} no wait \\boxed{4}"), "4");
    s_expect_str(rl_reward_extract_boxed("\\fbox{7}"), "7");
    s_expect_str(rl_reward_extract_boxed("\\boxed{1} and \\fbox{2}"), "2");
    s_expect_str(rl_reward_extract_boxed("\\fbox{1} and \\boxed{ 2 }"), "2");
    s_expect_str(rl_reward_extract_boxed("no answer at all"), NULL);
    /* truncated final answer: no answer even though an earlier one closed */
    s_expect_str(rl_reward_extract_boxed("\\boxed{1} then \\boxed{2"), NULL);
    s_expect_str(rl_reward_extract_boxed("\\boxed{}"), "");

    size_t start = 99, len = 99;
    const char *t = "x\\boxed{ab}y";
    assert_int_equal(rl_reward_find_boxed(t, &start, &len), 1);
    assert_int_equal(start, 8);
    assert_int_equal(len, 2);
    assert_int_equal(rl_reward_find_boxed("\\boxed", &start, &len), 0);
}

static void test_gsm8k_and_last_number(void **state)
{
    (void)state;
    s_expect_str(rl_reward_extract_gsm8k("She pays 1234 in total.\n#### 1,234"), "1234");
    s_expect_str(rl_reward_extract_gsm8k("#### $1,234.50"), "1234.50");
    s_expect_str(rl_reward_extract_gsm8k("#### -5"), "-5");
    s_expect_str(rl_reward_extract_gsm8k("#### 3\n#### 4"), "4");
    s_expect_str(rl_reward_extract_gsm8k("#### no number"), NULL);
    s_expect_str(rl_reward_extract_gsm8k("the answer is 12"), NULL);
    /* only the last 300 characters are searched */
    char buf[512];
    snprintf(buf, sizeof buf, "#### 9 %0350d", 0);
    memset(buf + 7, 'x', 350);
    s_expect_str(rl_reward_extract_gsm8k(buf), NULL);
    snprintf(buf, sizeof buf, "%0290d #### 9", 0);
    memset(buf, 'x', 290);
    s_expect_str(rl_reward_extract_gsm8k(buf), "9");

    s_expect_str(rl_reward_extract_last_number("so she has 1,234.5 apples."), "1234.5");
    s_expect_str(rl_reward_extract_last_number("temperature is -7 now"), "-7");
    s_expect_str(rl_reward_extract_last_number("10-4"), "4"); /* a binary minus */
    s_expect_str(rl_reward_extract_last_number("1, 2, 3."), "3");
    s_expect_str(rl_reward_extract_last_number("none"), NULL);
}

/* ---- normalisation ------------------------------------------------------------------- */

static void test_normalize(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"\\dfrac{1}{2}", "\\frac{1}{2}"},
        {"\\tfrac12", "\\frac{1}{2}"},
        {"\\frac1{2}", "\\frac{1}{2}"},
        {"$1,000$", "1000"},
        {"\\$1,234,567.25", "1234567.25"},
        {"(1,000, 2)", "(1,000,2)"}, /* not a single number: commas stay */
        {"\\left( 1, 2 \\right)", "(1,2)"},
        {"\\leftarrow", "\\leftarrow"},
        {"10 \\text{ cm}", "10"},
        {"\\text{Monday}", "Monday"},
        {"\\textbf{5}", "5"},
        {"5.", "5"},
        {"x = 4", "4"},
        {"{7}", "7"},
        {"\\sqrt2", "\\sqrt{2}"},
        {"50\\%", "50"},
        {"90^\\circ", "90"},
        {" 1 + 2 ", "1+2"},
        {"\xe2\x88\x92" "3", "-3"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *n = rl_reward_normalize(cases[i][0]);
        assert_non_null(n);
        if (strcmp(n, cases[i][1]) != 0)
            fail_msg("normalize('%s') = '%s', expected '%s'", cases[i][0], n, cases[i][1]);
        free(n);
    }

    double v;
    int is_int;
    assert_int_equal(rl_reward_parse_number("\\frac{1}{2}", &v, &is_int), 1);
    assert_true(v == 0.5 && !is_int);
    assert_int_equal(rl_reward_parse_number("-\\frac{3}{4}", &v, &is_int), 1);
    assert_true(v == -0.75);
    assert_int_equal(rl_reward_parse_number("-12", &v, &is_int), 1);
    assert_true(v == -12.0 && is_int);
    assert_int_equal(rl_reward_parse_number("3/4", &v, &is_int), 1);
    assert_true(v == 0.75);
    assert_int_equal(rl_reward_parse_number(".5", &v, &is_int), 1);
    assert_true(v == 0.5);
    assert_int_equal(rl_reward_parse_number("1/0", &v, &is_int), 0);
    assert_int_equal(rl_reward_parse_number("2\\pi", &v, &is_int), 0);
    assert_int_equal(rl_reward_parse_number("1e5", &v, &is_int), 0);
    assert_int_equal(rl_reward_parse_number("", &v, &is_int), 0);
}

static void test_answers_equal(void **state)
{
    (void)state;
    assert_int_equal(rl_reward_answers_equal("\\frac{1}{2}", "0.5"), 1);
    assert_int_equal(rl_reward_answers_equal("1,000", "1000"), 1);
    assert_int_equal(rl_reward_answers_equal("\\dfrac{1}{2}", "1/2"), 1);
    assert_int_equal(rl_reward_answers_equal("-3", "3"), 0);
    assert_int_equal(rl_reward_answers_equal("$-3$", "-3"), 1);
    assert_int_equal(rl_reward_answers_equal("", ""), 0); /* nothing equals a missing answer */
    assert_int_equal(rl_reward_answers_equal("-0", "0"), 1);
    /* relative tolerance 1e-6 for non-integers ... */
    assert_int_equal(rl_reward_answers_equal("1000000.5", "1000000.4"), 1);
    assert_int_equal(rl_reward_answers_equal("1.5", "1.4"), 0);
    /* ... but integers compare exactly, even beyond double precision */
    assert_int_equal(rl_reward_answers_equal("123456789012345678901", "123456789012345678902"),
                     0);
    assert_int_equal(rl_reward_answers_equal("123456789012345678901", "123456789012345678901"),
                     1);
}

/* ---- the table ------------------------------------------------------------------------- */

typedef struct {
    const char *source, *response, *gt;
    int correct;
} s_case;

static void test_accuracy_table(void **state)
{
    (void)state;
    char clipped[512];
    /* "#### 9" falls out of the last 300 characters; the fallback then takes
     * the last number, 11. */
    snprintf(clipped, sizeof clipped, "#### 9 %0350d 11", 0);
    memset(clipped + 7, 'x', 350);
    const s_case cases[] = {
        /* MATH: last \boxed{} + normalised / numeric equality */
        {"math", "\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", 1},
        {"math", "so \\boxed{0.5}", "\\frac{1}{2}", 1},
        {"math", "\\boxed{\\dfrac{1}{2}}", "0.5", 1},
        {"math", "\\boxed{\\tfrac12}", "1/2", 1},
        {"math", "\\boxed{1,000}", "1000", 1},
        {"math", "\\boxed{1000}", "1,000", 1},
        {"math", "\\boxed{-3}", "-3", 1},
        {"math", "\\boxed{-3}", "3", 0},
        {"math", "\\boxed{$5$}", "5", 1},
        {"math", "$\\boxed{5}$", "$5$", 1},
        {"math", "\\boxed{\\$12.50}", "12.5", 1},
        {"math", "\\boxed{10 \\text{ cm}}", "10", 1},
        {"math", "\\boxed{\\left( 1, 2 \\right)}", "(1,2)", 1},
        {"math", "\\boxed{(1,2)}", "(2,1)", 0},
        {"math", "\\boxed{x = 4}", "4", 1},
        {"math", "\\boxed{4.}", "4", 1},
        {"math", "\\boxed{\\sqrt{2}}", "\\sqrt2", 1},
        {"math", "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", 1},
        {"math", "\\boxed{3} hmm, \\boxed{4}", "4", 1},
        {"math", "\\boxed{3} hmm, \\boxed{4}", "3", 0},
        {"math", "no answer here", "5", 0},
        {"math", "\\boxed{}", "5", 0},
        {"math", "\\boxed{5", "5", 0},
        {"math", "\\fbox{7}", "7", 1},
        {"math", "\\boxed{50\\%}", "50", 1},
        {"math", "\\boxed{90^\\circ}", "90", 1},
        {"math", "\\boxed{\\text{Monday}}", "Monday", 1},
        {"math", "\\boxed{0.3333333}", "\\frac{1}{3}", 1},
        {"math", "\\boxed{0.333}", "\\frac{1}{3}", 0},
        {"math", "\\boxed{123456789012345678}", "123456789012345679", 0},
        {"math", "\\boxed{007}", "7", 1},
        {"math", "\\boxed{-\\frac{3}{4}}", "-0.75", 1},
        {"math", "\\boxed{\\frac{-3}{4}}", "-3/4", 1},
        {"math", "\\boxed{2 \\pi}", "2\\pi", 1},
        {"math", "\\boxed{2\\pi}", "\\pi", 0},
        {"math", "The answer is 5.", "5", 0}, /* MATH: no fallback by default */
        {"math500", "\\boxed{\\frac{1}{4}}", "0.25", 1},
        {"default", "\\boxed{12}", "12", 1},
        {"math", "\\boxed{6}", "Thus \\boxed{6}.", 1}, /* ground truth as a solution */
        /* GSM8K: #### first, then \boxed{}, then the last number */
        {"gsm8k", "so 2+3=5\n#### 5", "5", 1},
        {"gsm8k", "total: 1234 dollars\n#### 1,234", "1234", 1},
        {"gsm8k", "#### $1,234", "1,234", 1},
        {"gsm8k", "#### 72", "Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", 1},
        {"gsm8k", "She has 18 apples. The answer is 18.", "18", 1},
        {"gsm8k", "She has 18 apples, then 20.", "18", 0},
        {"gsm8k", "#### 5\nbut actually \\boxed{6}", "5", 1},
        {"gsm8k", "the answer is \\boxed{6} not 7", "6", 1},
        {"gsm8k", "#### -12", "-12", 1},
        {"gsm8k", "the result: -7", "-7", 1},
        {"gsm8k", "computing 10-4", "4", 1},
        {"gsm8k", "#### 2.50", "2.5", 1},
        {"gsm8k", clipped, "9", 0},
        {"GSM8K", "#### 3", "3", 1},
        {"openai/gsm8k", "nothing", "3", 0},
        /* arithmetic: an integer inside the last \boxed{}, exactly */
        {"arith", "<think>2+3</think> \\boxed{5}", "5", 1},
        {"arith", "\\boxed{ 5 }", "5", 1},
        {"arith", "\\boxed{5.0}", "5", 0},
        {"arith", "\\boxed{-12}", "-12", 1},
        {"arith", "\\boxed{12}", "-12", 0},
        {"arith", "5", "5", 0},
        {"arith", "\\boxed{4} \\boxed{5}", "5", 1},
        {"arithmetic", "\\boxed{0012}", "12", 1},
    };
    size_t n = sizeof cases / sizeof cases[0];
    assert_true(n >= 40);
    for (size_t i = 0; i < n; i++) {
        rl_reward_result r;
        int rc = rl_reward_score(NULL, cases[i].source, cases[i].response, cases[i].gt, 0.0, &r);
        if (rc)
            fail_msg("case %zu: error %s", i, rl_error_message());
        if (r.accuracy != (double)cases[i].correct)
            fail_msg("case %zu (%s): response '%.60s' vs '%s': accuracy %g, expected %d", i,
                     cases[i].source, cases[i].response, cases[i].gt, r.accuracy,
                     cases[i].correct);
    }
}

static void test_fallback_switches(void **state)
{
    (void)state;
    rl_reward_config cfg;
    rl_reward_config_default(&cfg);
    int ok = -1;
    assert_int_equal(rl_reward_accuracy(&cfg, RL_VERIFIER_GSM8K, "it is 18", "18", &ok), 0);
    assert_int_equal(ok, 1);
    cfg.last_number_fallback = 0;
    assert_int_equal(rl_reward_accuracy(&cfg, RL_VERIFIER_GSM8K, "it is 18", "18", &ok), 0);
    assert_int_equal(ok, 0);
    assert_int_equal(rl_reward_accuracy(&cfg, RL_VERIFIER_MATH, "it is 18", "18", &ok), 0);
    assert_int_equal(ok, 0);
    cfg.math_last_number_fallback = 1;
    assert_int_equal(rl_reward_accuracy(&cfg, RL_VERIFIER_MATH, "it is 18", "18", &ok), 0);
    assert_int_equal(ok, 1);
}

/* ---- format, overall, dispatch --------------------------------------------------------------- */

static void test_format(void **state)
{
    (void)state;
    static const struct {
        const char *r;
        double want;
    } cases[] = {
        {"<think>reason</think> The answer is \\boxed{5}.", 1.0},
        {"<think>reason</think>\\boxed{5}", 1.0},
        {"<think>a\nb</think>\n\\boxed{5\n}", 1.0},          /* DOTALL */
        {"< think >reason< /think > \\boxed{5}", 1.0},        /* spaces around < > / */
        {"  <think>a</think>\\boxed{5}", 1.0},                 /* ditto, at the start */
        {"<think></think>\\boxed{}", 1.0},                     /* .* may be empty */
        {"<think>reason \\boxed{5}", 0.0},                     /* missing </think> */
        {"\\boxed{5}<think>r</think>", 0.0},                   /* boxed before think */
        {"<think>r \\boxed{5}</think> done", 0.0},             /* boxed inside think */
        {"Sure. <think>r</think>\\boxed{5}", 0.0},             /* must start with <think> */
        {"<think>r</think>\\boxed{5", 0.0},                    /* no closing brace */
        {"<think>r</think> 5", 0.0},                           /* no boxed */
        {"", 0.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (rl_reward_format(cases[i].r) != cases[i].want)
            fail_msg("format('%s') = %g, expected %g", cases[i].r, rl_reward_format(cases[i].r),
                     cases[i].want);
}

static void test_overall(void **state)
{
    (void)state;
    assert_true(rl_reward_overall(1, 1, 0.1, 0) == 1.0);
    assert_float_equal(rl_reward_overall(1, 0, 0.1, 0), 0.9, 1e-15);
    assert_float_equal(rl_reward_overall(0, 1, 0.1, 0), 0.1, 1e-15);
    assert_true(rl_reward_overall(0, 0, 0.1, 0) == 0.0);
    assert_float_equal(rl_reward_overall(1, 0, 0.25, -0.5), 0.25, 1e-15);

    rl_reward_config cfg;
    rl_reward_config_default(&cfg);
    rl_reward_result r;
    assert_int_equal(rl_reward_score(&cfg, "math", "<think>x</think>\\boxed{2}", "2", 0.0, &r), 0);
    assert_true(r.accuracy == 1.0 && r.format == 1.0);
    assert_float_equal(r.score, 1.0, 1e-15);
    assert_int_equal(rl_reward_score(&cfg, "math", "\\boxed{2}", "2", 0.0, &r), 0);
    assert_true(r.accuracy == 1.0 && r.format == 0.0);
    assert_float_equal(r.score, 0.9, 1e-15);
    assert_int_equal(rl_reward_score(&cfg, "math", "<think>x</think>\\boxed{3}", "2", 0.3, &r), 0);
    assert_true(r.accuracy == 0.0 && r.format == 1.0);
    assert_float_equal(r.score, 0.1 + 0.3, 1e-15);
    cfg.format_weight = 0.5;
    assert_int_equal(rl_reward_score(&cfg, "gsm8k", "#### 4", "4", 0.0, &r), 0);
    assert_float_equal(r.score, 0.5, 1e-15);
    cfg.format_weight = 1.5;
    assert_int_equal(rl_reward_score(&cfg, "gsm8k", "#### 4", "4", 0.0, &r), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "format_weight"));
}

static void test_dispatch(void **state)
{
    (void)state;
    rl_verifier v;
    assert_int_equal(rl_reward_verifier_for(NULL, "arith", &v), 0);
    assert_int_equal(v, RL_VERIFIER_ARITH);
    assert_int_equal(rl_reward_verifier_for(NULL, "GSM8K", &v), 0);
    assert_int_equal(v, RL_VERIFIER_GSM8K);
    assert_int_equal(rl_reward_verifier_for(NULL, "math500", &v), 0);
    assert_int_equal(v, RL_VERIFIER_MATH);
    assert_int_equal(rl_reward_verifier_for(NULL, "HuggingFaceH4/MATH-500", &v), 0);
    assert_int_equal(v, RL_VERIFIER_MATH);
    assert_int_equal(rl_reward_verifier_for(NULL, "chess", &v), RL_ENOTFOUND);
    assert_non_null(strstr(rl_error_message(), "'chess'"));
    rl_reward_config cfg;
    rl_reward_config_default(&cfg);
    cfg.default_source = "gsm8k";
    assert_int_equal(rl_reward_verifier_for(&cfg, "chess", &v), 0);
    assert_int_equal(v, RL_VERIFIER_GSM8K);
    cfg.default_source = "go";
    assert_int_equal(rl_reward_verifier_for(&cfg, "chess", &v), RL_ENOTFOUND);
    assert_non_null(strstr(rl_error_message(), "'go'"));

    rl_reward_result r;
    assert_int_equal(rl_reward_score(NULL, "chess", "\\boxed{1}", "1", 0.0, &r), RL_ENOTFOUND);
    assert_non_null(strstr(rl_error_message(), "chess"));
    int ok;
    assert_int_equal(rl_reward_arith_match("\\boxed{1}", "one", &ok), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "'one'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boxed_extraction), cmocka_unit_test(test_gsm8k_and_last_number),
        cmocka_unit_test(test_normalize),        cmocka_unit_test(test_answers_equal),
        cmocka_unit_test(test_accuracy_table),   cmocka_unit_test(test_fallback_switches),
        cmocka_unit_test(test_format),           cmocka_unit_test(test_overall),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests_name("reward", tests, NULL, NULL);
}
