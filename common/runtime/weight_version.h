/* common/runtime/weight_version.h — the process's newest weight version,
 * shared by the weight channel's transports.
 *
 * Purpose: rl_weight_channel_version() (rlrt/runtime/channel.h, the
 * daemons' /metrics) reports the newest version this process sent to every
 * receiver or made active, whichever transport carried it (channel.c's
 * ZeroMQ, channel_ipc.c's CUDA IPC). Invariants: the value only grows.
 * Threading: any thread (atomic). Ownership: none.
 */
#ifndef RLRT_COMMON_RUNTIME_WEIGHT_VERSION_H
#define RLRT_COMMON_RUNTIME_WEIGHT_VERSION_H

#include <stdint.h>

/* Raises the process's weight version to v (no-op when it is not newer). */
void rl_weight_channel_note_version(uint64_t v);

#endif
