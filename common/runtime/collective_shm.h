/* common/runtime/collective_shm.h — the same-host path of the CPU
 * collectives (private to common/runtime; collective.c picks it).
 *
 * Purpose: when every rank of a communicator runs on one host (one IPC
 * namespace), an all-reduce goes through one POSIX shared-memory segment
 * instead of the ring's sockets: each rank copies a window of its buffer
 * into its slot, the ranks reduce the window's slices in parallel into a
 * result area, and every rank copies the result out; two barriers a window.
 * A byte crosses memory three times instead of a socket's copies per hop.
 *
 * Invariants: element i is summed in the ring's order for its ring chunk
 * (rlrt/runtime/collective.h: ((x[c+1] + x[c+2]) + ... ) + x[c], the mean
 * divides the last sum by W), so results are bit-identical to the ring's
 * whichever path ran. The barriers wait on a futex in the segment, end at
 * the communicator's timeout (naming the ranks that did not arrive) or at
 * an abort of the running operation (common/runtime/abort.h) within
 * RL_ABORT_POLL_MS.
 *
 * Ownership: rl_comm_shm_open maps the segment; rank 0 creates it
 * exclusively (its name is private to the communicator's nonce) and
 * unlinks the name once every rank has mapped it (rl_comm_shm_unlink), so
 * nothing outlives the processes; rl_comm_shm_close unmaps.
 */
#ifndef RLRT_RUNTIME_COLLECTIVE_SHM_H
#define RLRT_RUNTIME_COLLECTIVE_SHM_H

#include <stdint.h>

typedef struct rl_comm_shm rl_comm_shm;

/* Rank 0 (create = 1) makes the segment for `world` ranks with slots of
 * `slot` floats; the others open it. NULL (message set) when the host
 * cannot: no /dev/shm, no room in it, or another host's nonce. */
rl_comm_shm *rl_comm_shm_open(const char *nonce, int world, int rank, int64_t slot, int create);
/* Removes the segment's name (the mappings stay); ENOENT is no error. */
void rl_comm_shm_unlink(const char *nonce);
void rl_comm_shm_close(rl_comm_shm *s);

/* recv[i] = the sum (avg: mean) over ranks of send[i], i < count; send may
 * equal recv. timeout_ms bounds each barrier; abort_base is the running
 * operation's (abort.h). RL_OK, or RL_ETIMEOUT / RL_EPEER with the message
 * set (the segment is then unusable). */
int rl_comm_shm_all_reduce(rl_comm_shm *s, const float *send, float *recv, int64_t count, int avg,
                           int timeout_ms, uint64_t abort_base);

#endif
