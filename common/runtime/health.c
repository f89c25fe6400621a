/* health.c — read-only HTTP (libmicrohttpd) and sd_notify (libsystemd); see
 * rlrt/runtime/health.h. */
#include "rlrt/runtime/health.h"

#include "common/core/util.h"
#include "rlrt/error.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

struct rl_http {
    struct MHD_Daemon *mhd;
    rl_http_fn fn;
    void *arg;
    int port;
};

static enum MHD_Result s_send(struct MHD_Connection *conn, int status, const char *type,
                              char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result s_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload_data;
    rl_http *h = cls;
    if (!*state) { /* first call: headers only; answer on the second */
        *state = (void *)1;
        return MHD_YES;
    }
    if (*upload_size) /* a body: this server reads none */
        return MHD_NO;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        char *b = strdup("only GET and HEAD are served\n");
        return b ? s_send(conn, 405, "text/plain", b) : MHD_NO;
    }
    char *body = NULL;
    const char *type = "text/plain";
    int status = h->fn(h->arg, url, &body, &type);
    if (!body && !(body = strdup("")))
        return MHD_NO;
    return s_send(conn, status, type, body);
}

rl_http *rl_http_start(const char *bind, int port, rl_http_fn fn, void *arg)
{
    if (port < 0 || port > 65535) {
        rl_error_set(RL_EINVAL, "http: port %d outside [0, 65535]", port);
        return NULL;
    }
    const char *host = bind && *bind ? bind : "127.0.0.1";
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0)
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        rl_error_set(RL_EINVAL, "http: bind address '%s' is not an IPv4 address", host);
        return NULL;
    }
    rl_http *h = rl_zalloc(sizeof *h, "http");
    if (!h)
        return NULL;
    h->fn = fn;
    h->arg = arg;
    /* epoll or poll (MHD_USE_AUTO): select() cannot watch a descriptor >= 1024, and a
     * driver of many workers has that many open */
    h->mhd = MHD_start_daemon(MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD,
                              (uint16_t)port, NULL, NULL, s_on_request, h, MHD_OPTION_SOCK_ADDR,
                              (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, 32u,
                              /* one peer cannot hold every connection (slow headers kept
                               * the liveness probe out) */
                              MHD_OPTION_PER_IP_CONNECTION_LIMIT, 4u,
                              MHD_OPTION_CONNECTION_TIMEOUT, 5u,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_END);
    if (!h->mhd) {
        free(h);
        rl_error_set(RL_EIO, "http: cannot listen on %s:%d (in use, or not an address of this "
                     "host)", host, port);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    return h;
}

int rl_http_port(const rl_http *h) { return h ? h->port : 0; }

void rl_http_stop(rl_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->mhd);
    free(h);
}

int rl_sd_notify(const char *state)
{
    return sd_notify(0, state);
}

uint64_t rl_sd_watchdog_usec(void)
{
    uint64_t usec = 0;
    return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

