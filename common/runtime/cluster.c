/* cluster.c — cluster.yaml schema, validation and placement table (see
 * rlrt/runtime/cluster.h). */
#include "rlrt/runtime/cluster.h"

#include "common/core/util.h"
#include "rlrt/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rl_launch_mode_name(rl_launch_mode m)
{
    switch (m) {
    case RL_LAUNCH_LOCAL: return "local";
    case RL_LAUNCH_SSH: return "ssh";
    case RL_LAUNCH_EXTERNAL: return "external";
    }
    return "?";
}

/* ---- node readers that turn "missing" into a located error -------------------- */

static const rl_config_node *s_need(const rl_config_node *n, const char *key)
{
    const rl_config_node *c = rl_config_node_at(n, key);
    if (!c)
        rl_config_node_error(n, RL_ECONFIG, "missing key '%s'", key);
    return c;
}

/* s_need, and the node must be a `kind` ("expected <what>" otherwise). */
static const rl_config_node *s_need_kind(const rl_config_node *n, const char *key,
                                         rl_config_kind kind, const char *what)
{
    const rl_config_node *c = s_need(n, key);
    if (c && rl_config_node_kind(c) != kind) {
        rl_config_node_error(c, RL_ECONFIG, "expected %s", what);
        return NULL;
    }
    return c;
}

static int s_copy_string(const rl_config_node *n, char *dst, size_t size)
{
    const char *s;
    int rc = rl_config_node_string(n, &s);
    if (rc)
        return rc;
    if (strlen(s) >= size)
        return rl_config_node_error(n, RL_ECONFIG, "too long (at most %zu characters)",
                                    size - 1);
    memcpy(dst, s, strlen(s) + 1);
    return RL_OK;
}

static int s_int_range(const rl_config_node *n, int lo, int hi, int *out)
{
    int64_t v;
    int rc = rl_config_node_int(n, &v);
    if (rc)
        return rc;
    if (v < lo || v > hi)
        return rl_config_node_error(n, RL_ECONFIG, "%lld out of range %d..%d",
                                    (long long)v, lo, hi);
    *out = (int)v;
    return RL_OK;
}

/* Optional positive number at `key` of map `n` (absent: unchanged). */
static int s_opt_positive(const rl_config_node *n, const char *key, double *out)
{
    const rl_config_node *c = rl_config_node_at(n, key);
    if (!c)
        return RL_OK;
    double v;
    int rc = rl_config_node_double(c, &v);
    if (rc)
        return rc;
    if (!(v > 0))
        return rl_config_node_error(c, RL_ECONFIG, "must be > 0, got %g", v);
    *out = v;
    return RL_OK;
}

static int s_opt_int(const rl_config_node *n, const char *key, int lo, int hi, int *out)
{
    const rl_config_node *c = rl_config_node_at(n, key);
    return c ? s_int_range(c, lo, hi, out) : RL_OK;
}

static int s_find_node(const rl_cluster *cl, const char *name)
{
    for (int i = 0; i < cl->n_nodes; i++)
        if (strcmp(cl->nodes[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- sections ------------------------------------------------------------------------ */

/* A node's `relay` and `relay_hold_ms` (rlrt/runtime/relay.h). */
static int s_read_relay(const rl_config_node *m, rl_cluster_node *nd)
{
    const rl_config_node *v = rl_config_node_at(m, "relay");
    int rc;
    nd->relay_hold_ms = 20;
    if (v && (rc = rl_config_node_bool(v, &nd->relay)))
        return rc;
    const rl_config_node *h = rl_config_node_at(m, "relay_hold_ms");
    if (h && !nd->relay)
        return rl_config_node_error(h, RL_ECONFIG, "relay_hold_ms on node '%s', which has no "
                                    "relay (relay: true)", nd->name);
    if ((rc = s_opt_int(m, "relay_hold_ms", 0, 10000, &nd->relay_hold_ms)))
        return rc;
    if (!nd->relay)
        return RL_OK;
    if (nd->launch == RL_LAUNCH_EXTERNAL)
        return rl_config_node_error(v, RL_ECONFIG, "node '%s' is external: the driver starts "
                                    "no relay there; run `rl-worker --relay --driver DRIVER "
                                    "--bind ENDPOINT --node NAME` on it and point its workers' "
                                    "--driver at ENDPOINT (the driver needs no setting)",
                                    nd->name);
    size_t n = strlen(nd->name);
    int ok = n >= 1 && n <= 32;
    for (size_t i = 0; ok && i < n; i++) {
        char c = nd->name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-' || c == '.';
    }
    if (!ok)
        return rl_config_node_error(v, RL_ECONFIG, "a node with a relay needs a name of 1 to 32 "
                                    "letters, digits, '_', '-' or '.' (it names the relay's "
                                    "socket); node '%s' has not", nd->name);
    return RL_OK;
}

static int s_read_nodes(rl_cluster *cl, const rl_config_node *root)
{
    static const char *const keys[] = {"name", "address", "gpus", "launch", "ssh", "relay",
                                       "relay_hold_ms", NULL};
    static const char *const ssh_keys[] = {"user", "command", NULL};
    const rl_config_node *list = s_need_kind(root, "nodes", RL_CONFIG_LIST, "a list of nodes");
    if (!list)
        return RL_ECONFIG;
    size_t n = rl_config_node_len(list);
    if (n == 0)
        return rl_config_node_error(list, RL_ECONFIG, "at least one node is needed");
    cl->nodes = calloc(n, sizeof *cl->nodes);
    if (!cl->nodes)
        return rl_error_set(RL_ENOMEM, "cluster: out of memory");
    for (size_t i = 0; i < n; i++) {
        const rl_config_node *m = rl_config_node_item(list, i);
        rl_cluster_node *nd = &cl->nodes[i];
        int rc = rl_config_node_check_keys(m, keys);
        if (rc)
            return rc;
        const rl_config_node *v;
        if (!(v = s_need(m, "name")) || (rc = s_copy_string(v, nd->name, sizeof nd->name)))
            return rc ? rc : RL_ECONFIG;
        int dup = s_find_node(cl, nd->name);
        if (dup >= 0)
            return rl_config_node_error(v, RL_ECONFIG,
                                        "duplicate node '%s' (first defined at line %d)",
                                        nd->name, cl->nodes[dup].line);
        nd->line = rl_config_node_line(m);
        cl->n_nodes = (int)i + 1;
        if (!(v = s_need(m, "address")) ||
            (rc = s_copy_string(v, nd->address, sizeof nd->address)))
            return rc ? rc : RL_ECONFIG;
        if ((rc = s_opt_int(m, "gpus", 0, RL_CLUSTER_MAX_GPUS, &nd->gpus)))
            return rc;
        nd->launch = RL_LAUNCH_LOCAL;
        if ((v = rl_config_node_at(m, "launch"))) {
            const char *s;
            if ((rc = rl_config_node_string(v, &s)))
                return rc;
            if (strcmp(s, "local") == 0)
                nd->launch = RL_LAUNCH_LOCAL;
            else if (strcmp(s, "ssh") == 0)
                nd->launch = RL_LAUNCH_SSH;
            else if (strcmp(s, "external") == 0)
                nd->launch = RL_LAUNCH_EXTERNAL;
            else
                return rl_config_node_error(v, RL_ECONFIG,
                                            "expected local, ssh or external, got '%s'", s);
        }
        snprintf(nd->ssh_command, sizeof nd->ssh_command, "ssh");
        if ((v = rl_config_node_at(m, "ssh"))) {
            if (nd->launch != RL_LAUNCH_SSH)
                return rl_config_node_error(v, RL_ECONFIG,
                                            "ssh settings on a node whose launch is '%s'",
                                            rl_launch_mode_name(nd->launch));
            if ((rc = rl_config_node_check_keys(v, ssh_keys)))
                return rc;
            const rl_config_node *u;
            if ((u = rl_config_node_at(v, "user")) &&
                (rc = s_copy_string(u, nd->ssh_user, sizeof nd->ssh_user)))
                return rc;
            if ((u = rl_config_node_at(v, "command")) &&
                (rc = s_copy_string(u, nd->ssh_command, sizeof nd->ssh_command)))
                return rc;
        }
        if ((rc = s_read_relay(m, nd)))
            return rc;
    }
    return RL_OK;
}

static int s_read_gpus(const rl_cluster *cl, const rl_config_node *g, rl_placement *p)
{
    if (rl_config_node_kind(g) != RL_CONFIG_LIST)
        return rl_config_node_error(g, RL_ECONFIG, "expected a list of GPU indices");
    const rl_cluster_node *nd = &cl->nodes[p->node];
    size_t n = rl_config_node_len(g);
    if (n > RL_CLUSTER_MAX_GPUS)
        return rl_config_node_error(g, RL_ECONFIG, "more than %d GPUs", RL_CLUSTER_MAX_GPUS);
    for (size_t i = 0; i < n; i++) {
        const rl_config_node *x = rl_config_node_item(g, i);
        int64_t v;
        int rc = rl_config_node_int(x, &v);
        if (rc)
            return rc;
        if (v < 0 || v >= nd->gpus)
            return rl_config_node_error(x, RL_ECONFIG,
                                        "GPU index %lld out of range: node '%s' has %d GPUs",
                                        (long long)v, nd->name, nd->gpus);
        for (int j = 0; j < p->ngpus; j++)
            if (p->gpus[j] == v)
                return rl_config_node_error(x, RL_ECONFIG, "GPU %lld listed twice",
                                            (long long)v);
        p->gpus[p->ngpus++] = (int)v;
    }
    return RL_OK;
}

/* `cpus:` of a placement or role: a well-formed CPU list (cpus.h), kept as
 * its canonical text. */
static int s_read_cpus(const rl_config_node *v, char *dst)
{
    const char *text;
    int rc = rl_config_node_string(v, &text);
    if (rc)
        return rc;
    cpu_set_t set;
    if (rl_cpus_parse(text, &set, NULL))
        return rl_config_node_error(v, RL_ECONFIG, "%s", rl_error_message());
    if (rl_cpus_format(&set, dst, RL_CPUS_TEXT_MAX) >= RL_CPUS_TEXT_MAX)
        return rl_config_node_error(v, RL_ECONFIG, "cpus: list too long");
    return RL_OK;
}

static int s_node_ref(const rl_cluster *cl, const rl_config_node *v, int *out)
{
    const char *name;
    int rc = rl_config_node_string(v, &name);
    if (rc)
        return rc;
    int i = s_find_node(cl, name);
    if (i < 0) {
        char known[512] = "";
        size_t len = 0;
        for (int k = 0; k < cl->n_nodes && len < sizeof known - 1; k++)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", k ? ", " : "",
                                    cl->nodes[k].name);
        return rl_config_node_error(v, RL_ECONFIG, "unknown node '%s' (nodes: %s)", name,
                                    known);
    }
    *out = i;
    return RL_OK;
}

static int s_read_role(rl_cluster *cl, int role, const rl_config_node *r, rl_placement *out)
{
    static const char *const keys[] = {"count", "placement", "node", "cpus", NULL};
    static const char *const pkeys[] = {"rank", "node", "gpus", "cpus", NULL};
    int rc = rl_config_node_check_keys(r, keys);
    if (rc)
        return rc;
    const rl_config_node *cn = s_need(r, "count");
    if (!cn)
        return RL_ECONFIG;
    int count = 0;
    if ((rc = s_int_range(cn, 0, 1 << 20, &count)))
        return rc;
    const rl_config_node *pl = rl_config_node_at(r, "placement");
    const rl_config_node *nn = rl_config_node_at(r, "node");
    if (pl && nn)
        return rl_config_node_error(r, RL_ECONFIG, "give either 'placement' or 'node', not both");
    const rl_config_node *rc_cpus = rl_config_node_at(r, "cpus");
    if (rc_cpus && pl)
        return rl_config_node_error(rc_cpus, RL_ECONFIG,
                                    "with 'placement', give cpus per rank in the placement");
    if (!pl && !nn)
        return rl_config_node_error(r, RL_ECONFIG, "missing key 'placement' (or 'node')");
    for (int k = 0; k < count; k++) {
        out[k].role = role;
        out[k].rank = -1;
    }
    if (nn) {
        int node;
        if ((rc = s_node_ref(cl, nn, &node)))
            return rc;
        char cpus[RL_CPUS_TEXT_MAX] = "";
        if (rc_cpus && (rc = s_read_cpus(rc_cpus, cpus)))
            return rc;
        for (int k = 0; k < count; k++) {
            out[k].rank = k;
            out[k].node = node;
            memcpy(out[k].cpus, cpus, sizeof cpus);
        }
        return RL_OK;
    }
    if (rl_config_node_kind(pl) != RL_CONFIG_LIST)
        return rl_config_node_error(pl, RL_ECONFIG, "expected a list of placements");
    size_t n = rl_config_node_len(pl);
    if (n != (size_t)count)
        return rl_config_node_error(cn, RL_ECONFIG,
                                    "count is %d but %zu placements are given", count, n);
    int *line_of = calloc((size_t)count + 1, sizeof *line_of);
    if (!line_of)
        return rl_error_set(RL_ENOMEM, "cluster: out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        const rl_config_node *m = rl_config_node_item(pl, i);
        const rl_config_node *v;
        int rank;
        if ((rc = rl_config_node_check_keys(m, pkeys)))
            break;
        if (!(v = s_need(m, "rank"))) {
            rc = RL_ECONFIG;
            break;
        }
        int64_t r64;
        if ((rc = rl_config_node_int(v, &r64)))
            break;
        if (r64 < 0 || r64 >= count) {
            rc = rl_config_node_error(v, RL_ECONFIG, "rank %lld out of range 0..%d",
                                      (long long)r64, count - 1);
            break;
        }
        rank = (int)r64;
        if (line_of[rank]) {
            rc = rl_config_node_error(v, RL_ECONFIG, "duplicate rank %d (also at line %d)",
                                      rank, line_of[rank]);
            break;
        }
        line_of[rank] = rl_config_node_line(v);
        rl_placement *p = &out[rank];
        p->rank = rank;
        if (!(v = s_need(m, "node"))) {
            rc = RL_ECONFIG;
            break;
        }
        if ((rc = s_node_ref(cl, v, &p->node)))
            break;
        if ((v = rl_config_node_at(m, "gpus")) && (rc = s_read_gpus(cl, v, p)))
            break;
        if ((v = rl_config_node_at(m, "cpus")))
            rc = s_read_cpus(v, p->cpus);
    }
    free(line_of);
    return rc;
}

/* A role name is an identifier: [a-z][a-z0-9_]*, shorter than the field. */
static int s_role_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= RL_CLUSTER_NAME_MAX || !(name[0] >= 'a' && name[0] <= 'z'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '_'))
            return 0;
    return 1;
}

static int s_read_roles(rl_cluster *cl, const rl_config_node *root)
{
    const rl_config_node *roles = s_need_kind(root, "roles", RL_CONFIG_MAP, "a map of roles");
    if (!roles)
        return RL_ECONFIG;
    size_t n = rl_config_node_len(roles);
    if (n > 1024)
        return rl_config_node_error(roles, RL_ECONFIG, "%zu roles; at most 1024", n);
    cl->roles = calloc(n ? n : 1, sizeof *cl->roles);
    if (!cl->roles)
        return rl_error_set(RL_ENOMEM, "cluster: out of memory");
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = rl_config_node_key(roles, i);
        int line = rl_config_node_key_line(roles, i), col = rl_config_node_key_column(roles, i);
        if (!s_role_name_ok(name))
            return rl_error_set(RL_ECONFIG,
                                "%s:%d:%d: roles.%s: invalid role name '%s' (expected "
                                "[a-z][a-z0-9_]*, at most %d characters)",
                                rl_config_node_file(roles), line, col, name, name,
                                RL_CLUSTER_NAME_MAX - 1);
        int dup = rl_cluster_role_index(cl, name);
        if (dup >= 0)
            return rl_error_set(RL_ECONFIG, "%s:%d:%d: roles.%s: duplicate role (first at line %d)",
                                rl_config_node_file(roles), line, col, name, cl->roles[dup].line);
        const rl_config_node *rn = rl_config_node_item(roles, i);
        if (rl_config_node_kind(rn) != RL_CONFIG_MAP)
            return rl_config_node_error(rn, RL_ECONFIG, "expected a map with 'count'");
        const rl_config_node *cn = s_need(rn, "count");
        int count = 0, rc;
        if (!cn)
            return RL_ECONFIG;
        if ((rc = s_int_range(cn, 0, 1 << 20, &count)))
            return rc;
        rl_cluster_role *r = &cl->roles[i];
        memcpy(r->name, name, strlen(name) + 1);
        r->count = count;
        r->line = line;
        cl->n_roles = (int)i + 1;
        total += count;
    }
    if (total > (1 << 20))
        return rl_config_node_error(roles, RL_ECONFIG, "%lld ranks in all; at most %d",
                                    (long long)total, 1 << 20);
    cl->placements = calloc((size_t)total + 1, sizeof *cl->placements);
    if (!cl->placements)
        return rl_error_set(RL_ENOMEM, "cluster: out of memory");
    int at = 0;
    for (int r = 0; r < cl->n_roles; r++) {
        int rc = s_read_role(cl, r, rl_config_node_item(roles, (size_t)r), cl->placements + at);
        if (rc)
            return rc;
        at += cl->roles[r].count;
    }
    cl->n_placements = (int)total;
    return RL_OK;
}

static int s_read_driver(rl_cluster *cl, const rl_config_node *root)
{
    static const char *const keys[] = {"bind", "address", "node", "port", "local_ipc", NULL};
    const rl_config_node *d = s_need(root, "driver");
    if (!d)
        return RL_ECONFIG;
    int rc = rl_config_node_check_keys(d, keys);
    if (rc)
        return rc;
    const rl_config_node *v;
    cl->driver_node = -1;
    if ((v = rl_config_node_at(d, "node")) && (rc = s_node_ref(cl, v, &cl->driver_node)))
        return rc;
    snprintf(cl->driver_bind, sizeof cl->driver_bind, "*");
    if ((v = rl_config_node_at(d, "bind")) &&
        (rc = s_copy_string(v, cl->driver_bind, sizeof cl->driver_bind)))
        return rc;
    const rl_cluster_node *home = &cl->nodes[cl->driver_node >= 0 ? cl->driver_node : 0];
    snprintf(cl->driver_address, sizeof cl->driver_address, "%s", home->address);
    if ((v = rl_config_node_at(d, "address")) &&
        (rc = s_copy_string(v, cl->driver_address, sizeof cl->driver_address)))
        return rc;
    if (!(v = s_need(d, "port")))
        return RL_ECONFIG;
    if ((rc = s_int_range(v, 1, 65535, &cl->driver_port)))
        return rc;
    cl->driver_local_ipc = 1;
    if ((v = rl_config_node_at(d, "local_ipc")) &&
        (rc = rl_config_node_bool(v, &cl->driver_local_ipc)))
        return rc;
    snprintf(cl->driver_bind_endpoint, sizeof cl->driver_bind_endpoint, "tcp://%s:%d",
             cl->driver_bind, cl->driver_port);
    snprintf(cl->driver_endpoint, sizeof cl->driver_endpoint, "tcp://%s:%d",
             cl->driver_address, cl->driver_port);
    return RL_OK;
}

/* A path of the cluster file: relative ones are taken from the file's
 * folder, so `rl-driver --cluster deploy/c.yaml` finds deploy/keys/... */
static int s_read_path(const rl_cluster *cl, const rl_config_node *n, const char *key, int need,
                       char *dst, size_t size)
{
    const rl_config_node *v = rl_config_node_at(n, key);
    if (!v)
        return need ? rl_config_node_error(n, RL_ECONFIG, "missing key '%s'", key) : RL_OK;
    const char *s;
    int rc = rl_config_node_string(v, &s);
    if (rc)
        return rc;
    if (!*s)
        return rl_config_node_error(v, RL_ECONFIG, "must not be empty");
    const char *slash = strrchr(cl->file, '/');
    int dir = s[0] != '/' && slash ? (int)(slash - cl->file) : 0;
    if ((size_t)snprintf(dst, size, "%.*s%s%s", dir, cl->file, dir ? "/" : "", s) >= size)
        return rl_config_node_error(v, RL_ECONFIG, "path too long (at most %zu characters)",
                                    size - 1);
    return RL_OK;
}

static int s_read_policy(rl_cluster *cl, const rl_config_node *root)
{
    static const char *const hb_keys[] = {"interval_s", "liveness", "give_up_s", NULL};
    static const char *const rs_keys[] = {"max_restarts", "backoff_s", "backoff_max_s",
                                          "call_retries", NULL};
    static const char *const lim_keys[] = {"max_message_mb", NULL};
    static const char *const http_keys[] = {"bind", "driver_port", "worker_port", NULL};
    static const char *const sec_keys[] = {"driver_cert", "worker_cert", "authorized_keys", NULL};
    const rl_config_node *v;
    int rc;
    cl->heartbeat_give_up_s = 0;
    if ((v = rl_config_node_at(root, "heartbeat"))) {
        if ((rc = rl_config_node_check_keys(v, hb_keys)) ||
            (rc = s_opt_positive(v, "interval_s", &cl->heartbeat_interval_s)) ||
            (rc = s_opt_int(v, "liveness", 1, 1000, &cl->heartbeat_liveness)) ||
            (rc = s_opt_positive(v, "give_up_s", &cl->heartbeat_give_up_s)))
            return rc;
        const rl_config_node *g = rl_config_node_at(v, "give_up_s");
        if (g && cl->heartbeat_give_up_s > 2e6)
            return rl_config_node_error(g, RL_ECONFIG, "must be at most 2000000 s, got %g",
                                        cl->heartbeat_give_up_s);
    }
    if (!(cl->heartbeat_give_up_s > 0))
        cl->heartbeat_give_up_s = cl->heartbeat_interval_s * cl->heartbeat_liveness;
    if ((v = rl_config_node_at(root, "restart"))) {
        if ((rc = rl_config_node_check_keys(v, rs_keys)) ||
            (rc = s_opt_int(v, "max_restarts", 0, 1000000, &cl->restart_max)) ||
            (rc = s_opt_positive(v, "backoff_s", &cl->restart_backoff_s)) ||
            (rc = s_opt_positive(v, "backoff_max_s", &cl->restart_backoff_max_s)) ||
            (rc = s_opt_int(v, "call_retries", 0, 1000, &cl->restart_call_retries)))
            return rc;
    }
    if ((v = rl_config_node_at(root, "limits"))) {
        int mb = RL_CLUSTER_DEFAULT_MAX_MESSAGE_MB;
        if ((rc = rl_config_node_check_keys(v, lim_keys)) ||
            (rc = s_opt_int(v, "max_message_mb", 1, 1 << 20, &mb)))
            return rc;
        cl->max_message_bytes = (int64_t)mb << 20;
    }
    if ((v = rl_config_node_at(root, "http"))) {
        const rl_config_node *b;
        if ((rc = rl_config_node_check_keys(v, http_keys)) ||
            ((b = rl_config_node_at(v, "bind")) &&
             (rc = s_copy_string(b, cl->http_bind, sizeof cl->http_bind))) ||
            (rc = s_opt_int(v, "driver_port", 0, 65535, &cl->http_driver_port)) ||
            (rc = s_opt_int(v, "worker_port", 0, 65535, &cl->http_worker_port)))
            return rc;
    }
    if ((v = rl_config_node_at(root, "security"))) {
        if ((rc = rl_config_node_check_keys(v, sec_keys)) ||
            (rc = s_read_path(cl, v, "driver_cert", 1, cl->security_driver_cert,
                              sizeof cl->security_driver_cert)) ||
            (rc = s_read_path(cl, v, "worker_cert", 0, cl->security_worker_cert,
                              sizeof cl->security_worker_cert)) ||
            (rc = s_read_path(cl, v, "authorized_keys", 1, cl->security_authorized_keys,
                              sizeof cl->security_authorized_keys)))
            return rc;
        cl->security = 1;
    }
    return s_opt_positive(root, "external_wait_timeout_s", &cl->external_wait_timeout_s);
}

rl_cluster *rl_cluster_from_config(const rl_config *c)
{
    static const char *const keys[] = {"driver", "heartbeat", "restart", "limits", "http",
                                       "security", "external_wait_timeout_s", "nodes", "roles",
                                       NULL};
    rl_cluster *cl = rl_zalloc(sizeof *cl, "cluster");
    if (!cl)
        return NULL;
    snprintf(cl->file, sizeof cl->file, "%s", rl_config_name(c));
    cl->heartbeat_interval_s = 1.0;
    cl->heartbeat_liveness = 3;
    cl->restart_max = 3;
    cl->restart_backoff_s = 1.0;
    cl->restart_backoff_max_s = 30.0;
    cl->external_wait_timeout_s = 300.0;
    cl->restart_call_retries = 2;
    cl->max_message_bytes = (int64_t)RL_CLUSTER_DEFAULT_MAX_MESSAGE_MB << 20;
    snprintf(cl->http_bind, sizeof cl->http_bind, "127.0.0.1");
    const rl_config_node *root = rl_config_root(c);
    int rc = rl_config_node_check_keys(root, keys);
    if (!rc)
        rc = s_read_nodes(cl, root);
    if (!rc)
        rc = s_read_driver(cl, root);
    if (!rc)
        rc = s_read_policy(cl, root);
    if (!rc)
        rc = s_read_roles(cl, root);
    if (rc) {
        rl_cluster_free(cl);
        return NULL;
    }
    return cl;
}

rl_cluster *rl_cluster_load(const char *path)
{
    rl_config *c = rl_config_parse_file(path);
    if (!c)
        return NULL;
    rl_cluster *cl = rl_cluster_from_config(c);
    rl_config_free(c);
    return cl;
}

void rl_cluster_free(rl_cluster *cl)
{
    if (!cl)
        return;
    free(cl->nodes);
    free(cl->roles);
    free(cl->placements);
    free(cl);
}

int rl_cluster_role_index(const rl_cluster *cl, const char *name)
{
    for (int i = 0; cl && name && i < cl->n_roles; i++)
        if (strcmp(cl->roles[i].name, name) == 0)
            return i;
    return -1;
}

const rl_placement *rl_cluster_find(const rl_cluster *cl, const char *role, int rank)
{
    int r = rl_cluster_role_index(cl, role);
    if (r < 0)
        return NULL;
    for (int i = 0; i < cl->n_placements; i++)
        if (cl->placements[i].role == r && cl->placements[i].rank == rank)
            return &cl->placements[i];
    return NULL;
}

int rl_cluster_core_share(const rl_cluster *cl, const rl_placement *p)
{
    if (p->cpus[0] || cl->nodes[p->node].launch == RL_LAUNCH_EXTERNAL)
        return 0;
    int k = 0;
    for (int i = 0; i < cl->n_placements; i++) {
        const rl_placement *q = &cl->placements[i];
        k += q->role == p->role && q->node == p->node && !q->cpus[0];
    }
    return k;
}

char *rl_cluster_table(const rl_cluster *cl)
{
    int w = 8; /* the role column fits the longest name */
    for (int r = 0; r < cl->n_roles; r++)
        if ((int)strlen(cl->roles[r].name) > w)
            w = (int)strlen(cl->roles[r].name);
    size_t line_max = (size_t)w + RL_CLUSTER_NAME_MAX + RL_CLUSTER_ADDR_MAX + 450 + RL_CPUS_TEXT_MAX;
    size_t cap = line_max * ((size_t)cl->n_placements + 1);
    char *out = malloc(cap);
    if (!out)
        return rl_error_set(RL_ENOMEM, "cluster: out of memory"), NULL;
    size_t len = (size_t)snprintf(out, cap, "%-*s %4s  %-16s %-24s %-8s %-12s %s\n", w, "role",
                                  "rank", "node", "address", "launch", "gpus", "cpus");
    for (int i = 0; i < cl->n_placements; i++) {
        const rl_placement *p = &cl->placements[i];
        const rl_cluster_node *nd = &cl->nodes[p->node];
        char gpus[400] = "-";
        size_t g = 0;
        for (int k = 0; k < p->ngpus; k++)
            g += (size_t)snprintf(gpus + g, sizeof gpus - g, "%s%d", k ? "," : "", p->gpus[k]);
        char share[48] = "-"; /* unpinned: all the node's cores, or 1/K of them */
        int k = rl_cluster_core_share(cl, p);
        if (k > 1)
            snprintf(share, sizeof share, "- (1/%d of the cores)", k);
        len += (size_t)snprintf(out + len, cap - len, "%-*s %4d  %-16s %-24s %-8s %-12s %s\n", w,
                                cl->roles[p->role].name, p->rank, nd->name, nd->address,
                                rl_launch_mode_name(nd->launch), gpus,
                                p->cpus[0] ? p->cpus : share);
    }
    return out;
}
