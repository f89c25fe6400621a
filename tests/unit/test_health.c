/* test_health.c — the /healthz server (rlrt/runtime/health.h) against a
 * peer that holds connections open with slow, never-finished headers: it
 * gets a few connections, not all of them, so a probe from another address
 * (the kubelet's liveness probe) is still answered. Before the per-address
 * limit, 32 such connections kept every probe out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/runtime/health.h"

static int s_render(void *arg, const char *path, char **body, const char **content_type)
{
    (void)arg;
    *body = strdup(strcmp(path, "/healthz") == 0 ? "ok\n" : "no\n");
    *content_type = "text/plain";
    return strcmp(path, "/healthz") == 0 ? 200 : 404;
}

/* A TCP connection to 127.0.0.1:port from source address `from`. */
static int s_connect(const char *from, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &src.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    dst.sin_port = htons((uint16_t)port);
    assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof dst), 0);
    return fd;
}

/* Sends GET /healthz on `fd` and returns the whole response (into buf). */
static const char *s_get(int fd, char *buf, size_t size)
{
    const char *req = "GET /healthz HTTP/1.0\r\n\r\n";
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    size_t got = 0;
    ssize_t r;
    while (got < size - 1 && (r = read(fd, buf + got, size - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    return buf;
}

static void test_slow_peer_cannot_hold_every_connection(void **state)
{
    (void)state;
    rl_http *h = rl_http_start("127.0.0.1", 0, s_render, NULL);
    assert_non_null(h);
    int port = rl_http_port(h), slow[32];
    for (int i = 0; i < 32; i++) {
        slow[i] = s_connect("127.0.0.1", port);
        const char *part = "GET /healthz HTTP/1.1\r\nHost: x\r\n"; /* headers never end */
        assert_int_equal(write(slow[i], part, strlen(part)), (ssize_t)strlen(part));
    }
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL); /* the server has taken them all in */
    int fd = s_connect("127.0.0.2", port);
    char buf[512];
    if (!strstr(s_get(fd, buf, sizeof buf), " 200 "))
        fail_msg("the probe from 127.0.0.2 got '%.80s' while one peer held 32 connections", buf);
    assert_non_null(strstr(buf, "ok"));
    close(fd);
    for (int i = 0; i < 32; i++)
        close(slow[i]);
    rl_http_stop(h);
}

/* A process with more than 1024 descriptors open (a driver of many
 * workers) still answers: select() cannot watch a descriptor >= 1024. */
static void test_answers_above_fd_1024(void **state)
{
    (void)state;
    struct rlimit lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
    if (lim.rlim_max < 1200) {
        print_message("skipped: RLIMIT_NOFILE hard limit %llu < 1200\n", (unsigned long long)lim.rlim_max);
        skip();
    }
    struct rlimit raised = {lim.rlim_max < 2048 ? lim.rlim_max : 2048, lim.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &raised), 0);
    int held[1100], nheld = 0;
    while (nheld < 1100 && (held[nheld] = dup(0)) >= 0 && held[nheld] < 1050)
        nheld++;
    if (nheld < 1100 && held[nheld] >= 0)
        nheld++;
    rl_http *h = rl_http_start("127.0.0.1", 0, s_render, NULL);
    if (!h)
        fail_msg("with %d descriptors open: %s", nheld, rl_error_message());
    int fd = s_connect("127.0.0.1", rl_http_port(h));
    assert_true(fd >= 1024);
    char buf[512];
    if (!strstr(s_get(fd, buf, sizeof buf), " 200 "))
        fail_msg("descriptor %d: got '%.80s'", fd, buf);
    close(fd);
    rl_http_stop(h);
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    setrlimit(RLIMIT_NOFILE, &lim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_peer_cannot_hold_every_connection),
        cmocka_unit_test(test_answers_above_fd_1024),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
