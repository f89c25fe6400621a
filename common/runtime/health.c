/* health.c — read-only HTTP (libmicrohttpd) and sd_notify (libsystemd); see
 * rlrt/runtime/health.h. */
#include "rlrt/runtime/health.h"

#include "common/core/util.h"
#include "rlrt/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

/* One connection as the admission policy sees it (see health.h). The
 * callbacks of libmicrohttpd run on its thread, the deadline on the
 * server's reaper thread; both under rl_http.mu. A connection's fd stays
 * valid while it is listed: libmicrohttpd reports it closed (and it is
 * unlisted) before it closes the descriptor. */
typedef struct s_conn {
    struct s_conn *prev, *next;
    int fd;
    uint32_t addr;  /* IPv4, network order */
    uint64_t t0_ms; /* the current request began (accept, or the last answer) */
    int answered;   /* its headers are complete: the handler ran */
    int cut;        /* shut down by us; libmicrohttpd closes it next */
} s_conn;

struct rl_http {
    struct MHD_Daemon *mhd;
    rl_http_fn fn;
    void *arg;
    int port;
    pthread_t reaper;
    pthread_mutex_t mu; /* guards what follows */
    pthread_cond_t cv;
    int stop;
    s_conn *conns; /* newest first */
    int live;      /* conns not cut */
};

static uint64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Ends connection c (mu held): libmicrohttpd sees the shutdown on its next
 * poll and closes it. */
static void s_cut(rl_http *h, s_conn *c)
{
    if (c->cut)
        return;
    shutdown(c->fd, SHUT_RDWR);
    c->cut = 1;
    h->live--;
}

/* Cuts every connection whose current request has run past the deadline
 * (mu held). */
static void s_reap(rl_http *h, uint64_t now)
{
    for (s_conn *c = h->conns; c; c = c->next)
        if (!c->cut && now - c->t0_ms > RL_HTTP_REQUEST_DEADLINE_MS)
            s_cut(h, c);
}

/* The oldest live connection of address `addr`, preferring those whose
 * request is still incomplete (mu held). */
static s_conn *s_oldest(rl_http *h, uint32_t addr)
{
    s_conn *best = NULL;
    for (s_conn *c = h->conns; c; c = c->next) {
        if (c->cut || c->addr != addr)
            continue;
        if (!best || (best->answered && !c->answered) ||
            (best->answered == c->answered && c->t0_ms <= best->t0_ms))
            best = c;
    }
    return best;
}

/* A new connection from addr: always admitted. When its address already
 * holds RL_HTTP_MAX_PER_ADDRESS connections, or the server
 * RL_HTTP_MAX_CONNECTIONS, the oldest (slow) one of that address, or of the
 * address that holds the most, is cut to make room. A slow client thus
 * keeps at most a few connections for at most the deadline, and a client
 * that sends its request at once is served even from a dripping address. */
static enum MHD_Result s_admit(void *cls, const struct sockaddr *sa, socklen_t len)
{
    rl_http *h = cls;
    if (len < (socklen_t)sizeof(struct sockaddr_in) || sa->sa_family != AF_INET)
        return MHD_NO;
    pthread_mutex_lock(&h->mu);
    s_reap(h, s_now_ms());
    uint32_t addr = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
    int mine = 0;
    for (s_conn *c = h->conns; c; c = c->next)
        mine += !c->cut && c->addr == addr;
    if (mine >= RL_HTTP_MAX_PER_ADDRESS) {
        s_conn *v = s_oldest(h, addr);
        if (v)
            s_cut(h, v);
    }
    if (h->live >= RL_HTTP_MAX_CONNECTIONS) {
        /* the address that holds the most gives one up */
        uint32_t top = 0;
        int most = 0;
        for (s_conn *c = h->conns; c; c = c->next) {
            if (c->cut)
                continue;
            int n = 0;
            for (s_conn *o = h->conns; o; o = o->next)
                n += !o->cut && o->addr == c->addr;
            if (n > most) {
                most = n;
                top = c->addr;
            }
        }
        s_conn *v = most ? s_oldest(h, top) : NULL;
        if (v)
            s_cut(h, v);
    }
    pthread_mutex_unlock(&h->mu);
    return MHD_YES;
}

static void s_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode toe)
{
    rl_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        s_conn *c = calloc(1, sizeof *c);
        if (!c || !fd) { /* untracked: the idle timeout still ends it */
            free(c);
            *socket_context = NULL;
            return;
        }
        c->fd = fd->connect_fd;
        if (ad && ad->client_addr && ad->client_addr->sa_family == AF_INET)
            c->addr = ((const struct sockaddr_in *)ad->client_addr)->sin_addr.s_addr;
        c->t0_ms = s_now_ms();
        pthread_mutex_lock(&h->mu);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        h->live++;
        pthread_mutex_unlock(&h->mu);
        *socket_context = c;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        s_conn *c = *socket_context;
        pthread_mutex_lock(&h->mu);
        if (c->prev)
            c->prev->next = c->next;
        else
            h->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        if (!c->cut)
            h->live--;
        pthread_mutex_unlock(&h->mu);
        free(c);
        *socket_context = NULL;
    }
}

static s_conn *s_conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* A request answered: a kept-alive connection starts its next one now. */
static void s_completed(void *cls, struct MHD_Connection *conn, void **state,
                        enum MHD_RequestTerminationCode toe)
{
    (void)state;
    (void)toe;
    rl_http *h = cls;
    s_conn *c = s_conn_of(conn);
    if (c) {
        pthread_mutex_lock(&h->mu);
        c->answered = 0;
        c->t0_ms = s_now_ms();
        pthread_mutex_unlock(&h->mu);
    }
}

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
        s_conn *c = s_conn_of(conn);
        if (c) {
            pthread_mutex_lock(&h->mu);
            c->answered = 1;
            pthread_mutex_unlock(&h->mu);
        }
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

/* The reaper thread: the deadline, checked every 100 ms. */
static void *s_reaper(void *arg)
{
    rl_http *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        s_reap(h, s_now_ms());
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->cv, &h->mu, &until);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

rl_http *rl_http_start(const char *bind_addr, int port, rl_http_fn fn, void *arg)
{
    if (port < 0 || port > 65535) {
        rl_error_set(RL_EINVAL, "http: port %d outside [0, 65535]", port);
        return NULL;
    }
    const char *host = bind_addr && *bind_addr ? bind_addr : "127.0.0.1";
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
    /* our own listening socket: a port in use is told apart (RL_EEXIST) */
    int one = 1;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 64) != 0) {
        int e = errno;
        if (lfd >= 0)
            close(lfd);
        rl_error_set(e == EADDRINUSE ? RL_EEXIST : RL_EIO, "http: cannot listen on %s:%d: %s",
                     host, port, strerror(e));
        return NULL;
    }
    struct sockaddr_in bound;
    socklen_t blen = sizeof bound;
    getsockname(lfd, (struct sockaddr *)&bound, &blen);
    rl_http *h = rl_zalloc(sizeof *h, "http");
    if (!h) {
        close(lfd);
        return NULL;
    }
    h->fn = fn;
    h->arg = arg;
    h->port = ntohs(bound.sin_port);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&h->mu, NULL);
    if (!rc && (rc = pthread_cond_init(&h->cv, &ca)) != 0)
        pthread_mutex_destroy(&h->mu);
    pthread_condattr_destroy(&ca);
    if (rc) {
        close(lfd);
        free(h);
        rl_error_set(RL_EIO, "http: mutex/condvar: %s", strerror(rc));
        return NULL;
    }
    /* poll, not select (a descriptor >= 1024 is fine) and not epoll (which
     * accepts up to 10 connections per turn: one per turn keeps a fresh
     * connection's request ahead of the evictions of s_admit). The
     * connection limits are ours (s_admit); libmicrohttpd's is a backstop
     * above them, for connections cut but not yet closed. */
    h->mhd = MHD_start_daemon(
        MHD_USE_POLL_INTERNAL_THREAD, 0, s_admit, h, s_on_request, h, MHD_OPTION_LISTEN_SOCKET, lfd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(2 * RL_HTTP_MAX_CONNECTIONS),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(RL_HTTP_REQUEST_DEADLINE_MS / 1000),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_NOTIFY_CONNECTION, s_notify,
        h, MHD_OPTION_NOTIFY_COMPLETED, s_completed, h, MHD_OPTION_END);
    if (!h->mhd) {
        close(lfd);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
        rl_error_set(RL_EIO, "http: libmicrohttpd cannot serve on %s:%d", host, port);
        return NULL;
    }
    if ((rc = pthread_create(&h->reaper, NULL, s_reaper, h)) != 0) {
        MHD_stop_daemon(h->mhd);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
        rl_error_set(RL_EIO, "http: cannot start its thread: %s", strerror(rc));
        return NULL;
    }
    return h;
}

int rl_http_port(const rl_http *h) { return h ? h->port : 0; }

void rl_http_stop(rl_http *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->reaper, NULL);
    MHD_stop_daemon(h->mhd); /* closes the listening socket and every connection */
    while (h->conns) { /* none left after the daemon's close notifications */
        s_conn *c = h->conns;
        h->conns = c->next;
        free(c);
    }
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
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

