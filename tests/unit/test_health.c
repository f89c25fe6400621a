/* test_health.c — the /healthz server (rlrt/runtime/health.h) against a
 * peer that holds connections open with slow, never-finished headers: it
 * gets a few connections, not all of them, so a probe from another address
 * (the kubelet's liveness probe) is still answered. Before the per-address
 * limit, 32 such connections kept every probe out. A request's headers must
 * arrive within a total deadline (dripping one line a second does not
 * extend it), and a probe from the very address that drips 40 connections
 * is still answered: before, the dripper kept the 4 per-address slots busy
 * and such a probe got nothing for as long as the drip lasted. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
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

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void s_sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* 1 when the server closed `fd` (EOF or reset) within `ms`. */
static int s_closed_within(int fd, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* One header line a second never completes a request: the server cuts the
 * connection at its total deadline, though the line before came 1 s ago
 * (an idle timeout of 5 s would never fire). */
static void test_slow_headers_cut_at_total_deadline(void **state)
{
    (void)state;
    rl_http *h = rl_http_start("127.0.0.1", 0, s_render, NULL);
    assert_non_null(h);
    int fd = s_connect("127.0.0.1", rl_http_port(h));
    const char *first = "GET /healthz HTTP/1.1\r\n";
    assert_int_equal(write(fd, first, strlen(first)), (ssize_t)strlen(first));
    double t0 = s_now();
    int cut = 0;
    while (!cut && s_now() - t0 < 20) {
        const char *line = "X-Drip: 1\r\n";
        if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0)
            cut = 1;
        else
            cut = s_closed_within(fd, 1000);
    }
    double took = s_now() - t0;
    close(fd);
    rl_http_stop(h);
    if (!cut)
        fail_msg("a connection dripping one header line a second was still open after %.1f s", took);
    print_message("dripping connection cut after %.1f s (deadline %d ms)\n", took,
                  RL_HTTP_REQUEST_DEADLINE_MS);
    assert_true(took < RL_HTTP_REQUEST_DEADLINE_MS / 1000.0 + 10);
}

typedef struct {
    int port;
    volatile int stop;
    int reconnects;
} s_drip;

/* 40 connections from 127.0.0.1, each dripping one header line a second;
 * a connection the server closes is opened again at once. */
static void *s_drip_main(void *arg)
{
    s_drip *dr = arg;
    enum { N = 40 };
    int fds[N];
    const char *first = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < N; i++) {
        fds[i] = s_connect("127.0.0.1", dr->port);
        send(fds[i], first, strlen(first), MSG_NOSIGNAL);
    }
    while (!dr->stop) {
        for (int i = 0; i < N && !dr->stop; i++) {
            const char *line = "X-Drip: 1\r\n";
            char c;
            ssize_t r = recv(fds[i], &c, 1, MSG_DONTWAIT);
            int dead = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                       send(fds[i], line, strlen(line), MSG_NOSIGNAL) < 0;
            if (dead) {
                close(fds[i]);
                fds[i] = s_connect("127.0.0.1", dr->port);
                send(fds[i], first, strlen(first), MSG_NOSIGNAL);
                dr->reconnects++;
            }
            s_sleep_ms(1000 / N);
        }
    }
    for (int i = 0; i < N; i++)
        close(fds[i]);
    return NULL;
}

/* GET /healthz on a fresh connection from 127.0.0.1, the answer waited for
 * up to 5 s: 1 when it is a 200. */
static int s_probe(int port, char *buf, size_t size)
{
    int fd = s_connect("127.0.0.1", port);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const char *req = "GET /healthz HTTP/1.0\r\n\r\n";
    size_t got = 0;
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req)) {
        ssize_t r;
        while (got < size - 1 && (r = read(fd, buf + got, size - 1 - got)) > 0)
            got += (size_t)r;
    }
    buf[got] = '\0';
    close(fd);
    return strstr(buf, " 200 ") != NULL;
}

/* 40 dripping connections from 127.0.0.1 while a prober on 127.0.0.1 polls
 * /healthz twice a second for 8 s: every probe is answered within 5 s
 * (three tries at most). The server answers in milliseconds; the bound is
 * for a loaded machine. */
static void test_prober_answered_beside_a_dripper(void **state)
{
    (void)state;
    rl_http *h = rl_http_start("127.0.0.1", 0, s_render, NULL);
    assert_non_null(h);
    s_drip dr = {.port = rl_http_port(h)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_drip_main, &dr), 0);
    s_sleep_ms(1500); /* the drip holds its connections */
    double t0 = s_now(), worst = 0;
    int probes = 0, failed = 0;
    char buf[512] = "";
    while (s_now() - t0 < 8) {
        double p0 = s_now();
        int ok = 0;
        for (int tries = 0; tries < 3 && !ok && s_now() - p0 < 5; tries++)
            ok = s_probe(dr.port, buf, sizeof buf);
        double took = s_now() - p0;
        worst = took > worst ? took : worst;
        probes++;
        if (!ok || took > 5)
            failed++;
        s_sleep_ms(500);
    }
    dr.stop = 1;
    pthread_join(t, NULL);
    rl_http_stop(h);
    print_message("%d probes beside 40 dripping connections: %d unanswered, slowest %.3f s; "
                  "the dripper reconnected %d times\n", probes, failed, worst, dr.reconnects);
    if (failed)
        fail_msg("%d of %d probes from the dripping address got no answer within 5 s (last: "
                 "'%.60s')", failed, probes, buf);
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
        cmocka_unit_test(test_slow_headers_cut_at_total_deadline),
        cmocka_unit_test(test_prober_answered_beside_a_dripper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
