/* fuzz_cluster_yaml.c — libFuzzer target for cluster.yaml: the YAML parser
 * (common/core/config.c) and the cluster schema, placement and range checks
 * (common/runtime/cluster.c). One input is one cluster file. Oracle: an
 * accepted cluster is internally consistent (every placement names a known
 * role, rank and node; GPU indices are in range). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rlrt/config.h"
#include "rlrt/runtime/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_config *c = rl_config_parse_string((const char *)data, size, "fuzz-cluster.yaml");
    if (!c)
        return 0;
    rl_cluster *cl = rl_cluster_from_config(c);
    if (cl) {
        for (int i = 0; i < cl->n_placements; i++) {
            const rl_placement *p = &cl->placements[i];
            if (p->role < 0 || p->role >= cl->n_roles || p->node < 0 || p->node >= cl->n_nodes ||
                p->rank < 0 || p->rank >= cl->roles[p->role].count || p->ngpus < 0 ||
                p->ngpus > RL_CLUSTER_MAX_GPUS)
                abort();
            for (int g = 0; g < p->ngpus; g++)
                if (p->gpus[g] < 0 || p->gpus[g] >= cl->nodes[p->node].gpus)
                    abort();
        }
        if (cl->max_message_bytes < 1024 || cl->driver_port < 1 || cl->driver_port > 65535)
            abort();
        free(rl_cluster_table(cl));
        rl_cluster_free(cl);
    }
    rl_config_free(c);
    return 0;
}
