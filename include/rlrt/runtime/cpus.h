/* rlrt/runtime/cpus.h — CPU sets: which cores a worker process runs on.
 *
 * Purpose: on one machine several roles share the cores. cluster.yaml can
 * give a rank its own cores (placement `cpus: "0-7"`); the driver passes the
 * list to rl-worker as `--cpus LIST`, and the worker binds itself to it
 * (sched_setaffinity) and sizes its compute thread pool to the number of
 * cores in it, unless OMP_NUM_THREADS is set. Then the rollout can sample
 * while the actor trains without the two taking each other's cores (the
 * one-step-off loop, rlvr_async), the way verl and RLinf give each role its
 * own devices.
 *
 * The text is Linux's CPU list format (cpuset(7), /sys/.../cpus_allowed_list):
 * comma-separated indices and inclusive ranges, "0-3,8,10-11". Indices are
 * < RL_CPUS_MAX; a range runs low to high; no index may appear twice; no
 * spaces; at least one index.
 *
 * Ranks that are not given cores but share a machine with other ranks of
 * their role (they compute at the same time, as an actor's data-parallel
 * ranks do) split its cores instead: the driver passes `--share-cores K`
 * and each sizes its pool to 1/K of the cores it may use (rl_cpus_allowed),
 * so K ranks do not run K full pools on the same cores.
 *
 * Errors: RL_EINVAL with a message naming the list and the problem (parse),
 * or the cores that this process may not use (bind). Nothing here prints.
 */
#ifndef RLRT_RUNTIME_CPUS_H
#define RLRT_RUNTIME_CPUS_H

#include <sched.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CPUS_MAX CPU_SETSIZE /* 1024 with glibc */
#define RL_CPUS_TEXT_MAX 256    /* longest list text accepted */

/* Parses `text` into *set (cleared first); *count = cores in it (may be
 * NULL). */
int rl_cpus_parse(const char *text, cpu_set_t *set, int *count);

/* Writes `set` as a canonical list ("0-3,8") into out[size]; "" for an
 * empty set. Returns the length it needed (as snprintf does). */
int rl_cpus_format(const cpu_set_t *set, char *out, size_t size);

/* Binds the calling thread (before any other threads start: the process) to
 * the cores of `text`. Every core must be one the process may already use
 * (its affinity mask: online, and allowed by its cgroup/container); the
 * error lists those it may not and those it may. *count = cores bound. */
int rl_cpus_bind(const char *text, int *count);

/* *count = the cores this process may run on (its affinity mask). */
int rl_cpus_allowed(int *count);

#ifdef __cplusplus
}
#endif
#endif
