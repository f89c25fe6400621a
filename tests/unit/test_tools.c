/* test_tools.c — the tool interface: the calculator, the call parser, and
 * the runner's bounded outcomes for a tool that works, fails, returns
 * garbage or never returns (threads, deadlines, the stuck-call bound). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/tools/tools.h"

static void test_calculator(void **state)
{
    (void)state;
    struct { const char *e; int64_t v; } ok[] = {
        {"47*6+35", 317}, {"2+3*4", 14}, {"(2+3)*4", 20}, {" 12 - 30 ", -18}, {"-5*-5", 25},
        {"((((1))))", 1}, {"9223372036854775807", INT64_MAX}, {"0", 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = 0;
        if (rl_calc_eval(ok[i].e, &v))
            fail_msg("'%s': %s", ok[i].e, rl_error_message());
        assert_int_equal(v, ok[i].v);
    }
    const char *bad[] = {"", "1+", "2**3", "(1+2", "1)", "abc", "1/2", "9223372036854775808",
                         "9223372036854775807+1", "3037000500*3037000500",
                         "((((((((((((((((((1))))))))))))))))))",
                         "1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v;
        int rc = rl_calc_eval(bad[i], &v);
        if (rc == RL_OK)
            fail_msg("'%s' was accepted (%lld)", bad[i], (long long)v);
        assert_non_null(strstr(rl_error_message(), "calc:"));
    }
}

static void test_parse_call(void **state)
{
    (void)state;
    char name[RL_TOOL_MAX_NAME], args[RL_TOOL_MAX_ARGS];
    const char *t = "  calc 47*6 + 35  ";
    assert_int_equal(rl_tool_parse_call(t, strlen(t), name, args), RL_OK);
    assert_string_equal(name, "calc");
    assert_string_equal(args, "47*6 + 35");
    assert_int_equal(rl_tool_parse_call("calc", 4, name, args), RL_OK);
    assert_string_equal(args, "");
    assert_int_equal(rl_tool_parse_call("   ", 3, name, args), RL_EINVAL);
    assert_int_equal(rl_tool_parse_call("Calc 1", 6, name, args), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "bad tool name 'Calc'"));
    char longname[64];
    memset(longname, 'a', sizeof longname);
    assert_int_equal(rl_tool_parse_call(longname, sizeof longname, name, args), RL_EINVAL);
    char longargs[400] = "calc ";
    memset(longargs + 5, '1', 300);
    longargs[305] = '\0';
    assert_int_equal(rl_tool_parse_call(longargs, strlen(longargs), name, args), RL_EINVAL);
}

static int s_failing(void *st, const char *args, char *out, size_t cap)
{
    (void)st, (void)args, (void)out, (void)cap;
    return rl_error_set(RL_EINVAL, "the service is down");
}

static int s_garbage(void *st, const char *args, char *out, size_t cap)
{
    (void)st, (void)args;
    memset(out, 0x7f, cap - 1); /* too long and not printable */
    out[cap - 1] = '\0';
    return RL_OK;
}

static atomic_int s_release;

static int s_looping(void *st, const char *args, char *out, size_t cap)
{
    (void)st, (void)args;
    while (!atomic_load(&s_release))
        usleep(1000);
    snprintf(out, cap, "late");
    return RL_OK;
}

/* A tool that writes 100 printable characters (or what fits). */
static int s_long(void *st, const char *args, char *out, size_t cap)
{
    (void)st, (void)args;
    size_t n = cap - 1 < 100 ? cap - 1 : 100;
    memset(out, 'x', n);
    out[n] = '\0';
    return RL_OK;
}

/* This binary's pthread_create (the runner's calls bind to it): fails with
 * EAGAIN while s_no_threads is set, else forwards to the real one. */
static atomic_int s_no_threads;

int pthread_create(pthread_t *restrict th, const pthread_attr_t *restrict attr,
                   void *(*fn)(void *), void *restrict arg)
{
    if (atomic_load(&s_no_threads))
        return EAGAIN;
    int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    return real ? real(th, attr, fn, arg) : EAGAIN;
}

static double s_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void test_runner_outcomes(void **state)
{
    (void)state;
    rl_tool tools[4] = {rl_tool_calculator(), {"fail", s_failing, NULL},
                        {"junk", s_garbage, NULL}, {"loop", s_looping, NULL}};
    rl_tool_runner *r = rl_tool_runner_new(tools, 4, 200, 16, 2, "0123456789-");
    assert_non_null(r);
    char out[64];
    rl_tool_outcome oc;
    assert_int_equal(rl_tool_runner_call(r, "calc", "47*6+35", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_OK);
    assert_string_equal(out, "317");
    assert_int_equal(rl_tool_runner_call(r, "calc", "47*", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_ERROR);
    assert_non_null(strstr(out, "error: calc: expected a number"));
    assert_int_equal(rl_tool_runner_call(r, "fail", "", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_ERROR);
    assert_string_equal(out, "error: the service is down");
    assert_int_equal(rl_tool_runner_call(r, "junk", "", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_GARBAGE);
    assert_string_equal(out, "error: bad output");
    assert_int_equal(rl_tool_runner_call(r, "nope", "", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_UNKNOWN);
    assert_string_equal(out, "error: unknown tool nope");
    assert_string_equal(rl_tool_outcome_name(RL_TOOL_TIMEOUT), "timeout");
    /* a tool that never returns: each call ends at the deadline, and after
     * max_stuck abandoned calls the runner answers at once */
    for (int k = 0; k < 4; k++) {
        double t0 = s_now();
        assert_int_equal(rl_tool_runner_call(r, "loop", "", out, sizeof out, &oc), RL_OK);
        double dt = s_now() - t0;
        assert_int_equal(oc, RL_TOOL_TIMEOUT);
        assert_string_equal(out, "error: timeout");
        if (k < 2)
            assert_true(dt >= 0.19 && dt < 2.0);
        else
            assert_true(dt < 0.05);
    }
    assert_int_equal(rl_tool_runner_stuck(r), 2);
    /* the calculator is refused too while the runner is saturated */
    assert_int_equal(rl_tool_runner_call(r, "calc", "1+1", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_TIMEOUT);
    /* the stuck calls end, free themselves, and the runner recovers */
    atomic_store(&s_release, 1);
    for (int i = 0; i < 2000 && rl_tool_runner_stuck(r) > 0; i++)
        usleep(1000);
    assert_int_equal(rl_tool_runner_stuck(r), 0);
    assert_int_equal(rl_tool_runner_call(r, "calc", "1+1", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_OK);
    assert_string_equal(out, "2");
    rl_tool_runner_free(r);
}

static void test_runner_bad_setup(void **state)
{
    (void)state;
    rl_tool two[2] = {rl_tool_calculator(), rl_tool_calculator()};
    assert_null(rl_tool_runner_new(two, 2, 100, 16, 1, NULL));
    assert_non_null(strstr(rl_error_message(), "two tools named 'calc'"));
    rl_tool badname = {"Bad", s_failing, NULL};
    assert_null(rl_tool_runner_new(&badname, 1, 100, 16, 1, NULL));
    assert_null(rl_tool_runner_new(two, 1, 0, 16, 1, NULL));
    rl_tool_runner *r = rl_tool_runner_new(two, 1, 100, 16, 1, NULL);
    char small[8];
    rl_tool_outcome oc;
    assert_int_equal(rl_tool_runner_call(r, "calc", "1", small, sizeof small, &oc), RL_EINVAL);
    rl_tool_runner_free(r);
}

/* An output that does not fit the caller's buffer is garbage, not an OK
 * output cut silently. */
static void test_runner_output_cap(void **state)
{
    (void)state;
    rl_tool t = {"long", s_long, NULL};
    rl_tool_runner *r = rl_tool_runner_new(&t, 1, 1000, RL_TOOL_MAX_OUTPUT, 1, NULL);
    assert_non_null(r);
    char out[128];
    rl_tool_outcome oc;
    assert_int_equal(rl_tool_runner_call(r, "long", "", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_OK);
    assert_int_equal(strlen(out), 100);
    assert_int_equal(rl_tool_runner_call(r, "long", "", out, 100, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_GARBAGE);
    assert_string_equal(out, "error: bad output");
    assert_int_equal(rl_tool_runner_call(r, "long", "", out, 101, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_OK);
    assert_int_equal(strlen(out), 100);
    rl_tool_runner_free(r);
}

/* A call whose thread cannot start is an error outcome of that call; the
 * runner works again once threads can start. */
static void test_runner_no_thread(void **state)
{
    (void)state;
    rl_tool t = rl_tool_calculator();
    rl_tool_runner *r = rl_tool_runner_new(&t, 1, 1000, 16, 1, NULL);
    assert_non_null(r);
    char out[64];
    rl_tool_outcome oc = RL_TOOL_OK;
    atomic_store(&s_no_threads, 1);
    int rc = rl_tool_runner_call(r, "calc", "1+1", out, sizeof out, &oc);
    atomic_store(&s_no_threads, 0);
    assert_int_equal(rc, RL_OK);
    assert_int_equal(oc, RL_TOOL_ERROR);
    assert_string_equal(out, "error: cannot start a thread");
    assert_int_equal(rl_tool_runner_stuck(r), 0);
    assert_int_equal(rl_tool_runner_call(r, "calc", "1+1", out, sizeof out, &oc), RL_OK);
    assert_int_equal(oc, RL_TOOL_OK);
    assert_string_equal(out, "2");
    rl_tool_runner_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calculator),
        cmocka_unit_test(test_parse_call),
        cmocka_unit_test(test_runner_outcomes),
        cmocka_unit_test(test_runner_bad_setup),
        cmocka_unit_test(test_runner_output_cap),
        cmocka_unit_test(test_runner_no_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
