/* rlrt/runtime/health.h — what a daemon tells its operator: a read-only HTTP
 * endpoint (/healthz, /healthz/ready, Prometheus /metrics) and systemd
 * notifications.
 *
 * Purpose: rl-driver and rl-worker serve a small HTTP server (libmicrohttpd,
 * its own thread) on a configurable port. The daemon supplies one callback
 * that renders a path; everything it reads must be guarded by the daemon's
 * own lock, since the callback runs on the server's thread. Only GET and
 * HEAD are answered; any other method is 405, an unknown path 404, and a
 * request body is refused.
 *
 * Slow and many clients: a request must be answered within
 * RL_HTTP_REQUEST_DEADLINE_MS of its connection (or of the previous answer
 * on a kept-alive one), however steadily its headers trickle in; then the
 * connection is cut. A new connection is always admitted: when its address
 * already holds RL_HTTP_MAX_PER_ADDRESS connections (or the server
 * RL_HTTP_MAX_CONNECTIONS) the oldest one of that address (of the address
 * that holds the most) is cut, those still waiting for their headers first.
 * So a prober that sends its request at once is answered even from an
 * address that drips many slow connections, and nobody holds more than a
 * few connections for more than the deadline.
 *
 * sd_notify (libsystemd): rl_sd_notify() sends READY=1, STOPPING=1,
 * WATCHDOG=1, STATUS=... when the process runs under systemd (NOTIFY_SOCKET
 * set); elsewhere it does nothing. rl_sd_watchdog_usec() says whether the
 * unit asked for watchdog pings and how often.
 *
 * Ownership: rl_http_start() returns a server stopped and freed with
 * rl_http_stop() (which closes its listening socket first thing after its
 * thread ends). A callback returns a malloc'd body that the server frees.
 */
#ifndef RLRT_RUNTIME_HEALTH_H
#define RLRT_RUNTIME_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_http rl_http;

#define RL_HTTP_REQUEST_DEADLINE_MS 5000 /* from connection to answer, total */
#define RL_HTTP_MAX_CONNECTIONS 32
#define RL_HTTP_MAX_PER_ADDRESS 4

/* Renders `path` ("/healthz", ...): sets *body (malloc'd, NUL-terminated)
 * and *content_type (static text), returns the HTTP status. */
typedef int (*rl_http_fn)(void *arg, const char *path, char **body, const char **content_type);

/* Listens on bind:port (bind "" or NULL = 127.0.0.1; "0.0.0.0" = every
 * interface). NULL + an error naming the address when it cannot: RL_EEXIST
 * when another socket holds the port, RL_EINVAL for a bad address or port,
 * RL_EIO otherwise. */
rl_http *rl_http_start(const char *bind, int port, rl_http_fn fn, void *arg);
int rl_http_port(const rl_http *h);
void rl_http_stop(rl_http *h);

/* sd_notify(0, state) when under systemd; 1 if sent, 0 if not under
 * systemd, < 0 on error. Never fails the caller. */
int rl_sd_notify(const char *state);
/* The watchdog interval the unit asks for (WatchdogSec=), in µs; 0: none. */
uint64_t rl_sd_watchdog_usec(void);

#ifdef __cplusplus
}
#endif
#endif
