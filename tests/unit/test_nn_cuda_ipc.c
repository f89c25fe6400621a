/* test_nn_cuda_ipc.c — a device block shared between two processes on one
 * GPU (rl_device_ipc_*, common/nn/engine/device.h): the same-GPU weight
 * transport's primitive.
 *
 * The parent writes a versioned pattern into a CUDA block and sends its
 * handle to a child process (this binary again, `--ipc-child HANDLE N
 * VERSION`), which opens it, checks every element, writes the negation
 * back and closes it; the parent then sees the child's writes. Three
 * versions, a new child each. Errors: a garbage handle and a host pointer
 * are refused with a message, the CPU device has no IPC. The GPU cases
 * skip (with the reason) without a GPU or without make CUDA=1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/nn/engine/device.h"
#include "rlrt/error.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

static float s_pattern(int64_t i, int version) { return (float)(i % 1000) * 0.5f + (float)version; }

static void s_hex(const rl_device_ipc_handle *h, char out[2 * RL_DEVICE_IPC_BYTES + 1])
{
    for (int i = 0; i < RL_DEVICE_IPC_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", h->bytes[i]);
}

static int s_unhex(const char *s, rl_device_ipc_handle *h)
{
    if (strlen(s) != 2 * RL_DEVICE_IPC_BYTES)
        return -1;
    for (int i = 0; i < RL_DEVICE_IPC_BYTES; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        h->bytes[i] = (unsigned char)v;
    }
    return 0;
}

/* The child: open, check version's pattern, write its negation, close.
 * Exit 0, or 2 (bad arguments / open), 3 (a wrong element), 4 (copy). */
static int s_child(const char *hex, const char *ns, const char *vs)
{
    rl_device_ipc_handle h;
    int64_t n = atoll(ns);
    int version = atoi(vs);
    if (s_unhex(hex, &h) || n <= 0)
        return 2;
    float *d = rl_device_ipc_open(RL_DEVICE_CUDA, &h);
    if (!d) {
        fprintf(stderr, "child: %s\n", rl_error_message());
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)n);
    if (!x || rl_device_copy(RL_DEVICE_CPU, x, RL_DEVICE_CUDA, d, sizeof(float) * (size_t)n))
        return 4;
    for (int64_t i = 0; i < n; i++)
        if (x[i] != s_pattern(i, version)) {
            fprintf(stderr, "child: element %lld is %g, want %g\n", (long long)i, x[i],
                    s_pattern(i, version));
            return 3;
        }
    for (int64_t i = 0; i < n; i++)
        x[i] = -x[i];
    if (rl_device_copy(RL_DEVICE_CUDA, d, RL_DEVICE_CPU, x, sizeof(float) * (size_t)n) ||
        rl_device_sync(RL_DEVICE_CUDA) || rl_device_ipc_close(RL_DEVICE_CUDA, d))
        return 4;
    free(x);
    return 0;
}

static int s_gpu(void) { return rl_device_count(RL_DEVICE_CUDA) > 0; }

#define S_NEED_GPU()                                                                               \
    do {                                                                                           \
        if (!s_gpu()) {                                                                            \
            print_message("skip: no CUDA GPU visible (or built without make CUDA=1)\n");           \
            skip();                                                                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void test_ipc_two_processes(void **state)
{
    (void)state;
    S_NEED_GPU();
    const int64_t n = (1 << 20) + 13;
    float *d = rl_device_alloc(RL_DEVICE_CUDA, sizeof(float) * (size_t)n);
    float *x = malloc(sizeof(float) * (size_t)n);
    assert_non_null(d);
    assert_non_null(x);
    rl_device_ipc_handle h;
    assert_int_equal(rl_device_ipc_export(RL_DEVICE_CUDA, d, &h), 0);
    char hex[2 * RL_DEVICE_IPC_BYTES + 1], ns[32], vs[16];
    s_hex(&h, hex);
    snprintf(ns, sizeof ns, "%lld", (long long)n);
    for (int version = 1; version <= 3; version++) {
        for (int64_t i = 0; i < n; i++)
            x[i] = s_pattern(i, version);
        assert_int_equal(rl_device_copy(RL_DEVICE_CUDA, d, RL_DEVICE_CPU, x, sizeof(float) * (size_t)n), 0);
        assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0); /* written before the handle goes */
        snprintf(vs, sizeof vs, "%d", version);
        char *argv[] = {"/proc/self/exe", "--ipc-child", hex, ns, vs, NULL};
        pid_t pid;
        assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ), 0);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("version %d: the child exited with status %d", version, WEXITSTATUS(st));
        assert_int_equal(rl_device_copy(RL_DEVICE_CPU, x, RL_DEVICE_CUDA, d, sizeof(float) * (size_t)n), 0);
        for (int64_t i = 0; i < n; i++)
            if (x[i] != -s_pattern(i, version))
                fail_msg("version %d: element %lld is %g after the child, want %g", version,
                         (long long)i, x[i], -s_pattern(i, version));
    }
    print_message("3 versions of %lld floats through CUDA IPC and back\n", (long long)n);
    rl_device_free(RL_DEVICE_CUDA, d);
    free(x);
}

static void test_ipc_refused(void **state)
{
    (void)state;
    rl_device_ipc_handle h;
    memset(&h, 0, sizeof h);
    float host[4];
    assert_int_equal(rl_device_ipc_export(RL_DEVICE_CPU, host, &h), RL_EUNSUPPORTED);
    assert_null(rl_device_ipc_open(RL_DEVICE_CPU, &h));
    assert_int_equal(rl_error_code(), RL_EUNSUPPORTED);
    assert_non_null(strstr(rl_error_message(), "ipc open"));
    if (!s_gpu()) {
        print_message("skip: the CUDA cases (no CUDA GPU visible, or built without make CUDA=1)\n");
        return;
    }
    assert_null(rl_device_ipc_open(RL_DEVICE_CUDA, &h)); /* a garbage handle */
    assert_non_null(strstr(rl_error_message(), "cuda ipc open"));
    assert_int_equal(rl_device_ipc_export(RL_DEVICE_CUDA, host, &h), RL_EINVAL); /* host memory */
    assert_non_null(strstr(rl_error_message(), "cuda ipc export"));
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--ipc-child") == 0)
        return s_child(argv[2], argv[3], argv[4]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_two_processes),
        cmocka_unit_test(test_ipc_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
