/* common/metrics/metrics.h — training metrics: per-step (name, value) sets written to
 * metrics.jsonl and TensorBoard event files, and a one-line console summary.
 *
 * Purpose:
 *  * rl_metric_set: an ordered set of (name, double) pairs for one step.
 *    Names follow verl: "critic/score/mean", "actor/pg_loss",
 *    "timing_s/gen", "val/accuracy", "perf/throughput" (see RL_M_* below).
 *  * rl_metrics: the sink of a run. rl_metrics_open(dir, resume_step)
 *    writes <dir>/metrics.jsonl (one object per step,
 *    {"step": N, "name": value, ...}, shortest round-trip numbers, NaN/Inf
 *    as null) and <dir>/tensorboard/events.out.tfevents.<time>.<host>[.k]
 *    (one Event per step with one simple_value per metric).
 *    Resuming at step R first drops every record with step > R from
 *    metrics.jsonl and from the existing event files in <dir>/tensorboard
 *    (each rewritten atomically; a torn tail from a crash is dropped too),
 *    so a resumed run's metrics equal an uninterrupted run's. A fresh run is
 *    resume_step = -1 (drops everything). Steps must not decrease.
 *  * TFRecord framing and CRC32C (Castagnoli) are exposed for tools/tests.
 *
 * Invariants: rl_metrics_close() flushes and fsyncs both files. Library code
 * never prints: the console line is returned in a caller buffer.
 *
 * Ownership: rl_metric_set and rl_metrics objects are owned by the caller
 * (free / close). Names are copied. Scalars returned by
 * rl_tb_read_scalars() are owned by the caller (rl_tb_scalars_free).
 */
#ifndef RLRT_METRICS_H
#define RLRT_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Keys the console line reads (verl names where verl has one). */
#define RL_M_SCORE_MEAN "critic/score/mean"      /* mean sequence reward */
#define RL_M_REWARD_MEAN "critic/rewards/mean"   /* fallback for reward */
#define RL_M_ACCURACY "critic/accuracy/mean"     /* fraction of correct answers */
#define RL_M_VAL_ACCURACY "val/accuracy"
#define RL_M_RESPONSE_LEN "response_length/mean"
#define RL_M_KL_LOSS "actor/kl_loss"
#define RL_M_KL_PENALTY "actor/reward_kl_penalty"
#define RL_M_PPO_KL "actor/ppo_kl"
#define RL_M_ENTROPY "actor/entropy"
#define RL_M_THROUGHPUT "perf/throughput"        /* tokens per second */
#define RL_M_TIMING_PREFIX "timing_s/"           /* seconds per phase */

/* ---- metric sets ----------------------------------------------------------- */

typedef struct rl_metric_set rl_metric_set;

rl_metric_set *rl_metric_set_new(void);
void rl_metric_set_free(rl_metric_set *s);
void rl_metric_set_clear(rl_metric_set *s);
/* Adds or replaces (keeping the first position). RL_EINVAL for an empty
 * name or the reserved name "step". */
int rl_metric_set_put(rl_metric_set *s, const char *name, double value);
/* RL_ENOTFOUND (no message set) if absent. */
int rl_metric_set_get(const rl_metric_set *s, const char *name, double *value);
/* verl-style summary of v[0..n): puts "<prefix>/mean", "<prefix>/max" and
 * "<prefix>/min" (mean accumulated in double). n == 0 puts nothing. */
int rl_metric_set_put_stats(rl_metric_set *s, const char *prefix, const double *v, int64_t n);
int rl_metric_set_count(const rl_metric_set *s);
const char *rl_metric_set_name(const rl_metric_set *s, int i);
double rl_metric_set_value(const rl_metric_set *s, int i);

/* One-line summary into buf (always NUL-terminated; truncated to cap):
 *   "step 12 | reward 0.512 | acc 0.480 | len 23.4 | kl 0.0012 | ent 1.23 |
 *    gen 1.20s update 2.10s | 1.2e+03 tok/s"
 * Fields whose key is absent are left out (reward falls back to
 * RL_M_REWARD_MEAN, acc to RL_M_VAL_ACCURACY, kl to penalty then ppo_kl;
 * phases are every "timing_s/" key in set order). Returns the length the
 * full line needs (like snprintf). */
int rl_metrics_format_console(const rl_metric_set *s, int64_t step, char *buf, size_t cap);

/* ---- the sink ------------------------------------------------------------------ */

enum { RL_METRICS_JSONL = 1, RL_METRICS_TENSORBOARD = 2, RL_METRICS_ALL = 3 };

typedef struct rl_metrics rl_metrics;

/* Creates output_dir (and tensorboard/) if needed. flags: RL_METRICS_*
 * (0 = all). NULL + message on error. */
rl_metrics *rl_metrics_open(const char *output_dir, int64_t resume_step, int flags);
/* Appends one step (an empty set still writes {"step": N}). RL_EINVAL if
 * step is smaller than the last step written or resumed from. */
int rl_metrics_log(rl_metrics *m, int64_t step, const rl_metric_set *s);
/* Same with an explicit TensorBoard wall time (seconds since the epoch). */
int rl_metrics_log_at(rl_metrics *m, int64_t step, double wall_time, const rl_metric_set *s);
int rl_metrics_flush(rl_metrics *m);
/* Flushes, fsyncs, closes and frees (also on error). */
int rl_metrics_close(rl_metrics *m);
/* Path of the event file this sink writes (borrowed), NULL without TB. */
const char *rl_metrics_event_path(const rl_metrics *m);

/* ---- CRC32C, TFRecord, TensorBoard events ----------------------------------------------- */

/* CRC32C (Castagnoli, reflected 0x82F63B78) continuing from `crc` (0 to
 * start): rl_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t rl_crc32c(uint32_t crc, const void *data, size_t len);
/* TFRecord's masked CRC: ((c >> 15) | (c << 17)) + 0xa282ead8. */
uint32_t rl_crc32c_mask(uint32_t crc);

/* Writes one record: uint64 length, masked crc of the 8 length bytes, data,
 * masked crc of data (all little-endian). */
int rl_tfrecord_write(FILE *f, const void *data, size_t len);
/* Reads the next record into a malloc'd *data (caller frees). Returns 1 for
 * a record, 0 at a clean end of file, RL_EPROTO for a bad CRC or a
 * truncated record (message says which and the byte offset). */
int rl_tfrecord_read(FILE *f, void **data, size_t *len);

typedef struct rl_tb_writer rl_tb_writer;

/* Creates `path` (truncating) and writes the file_version "brain.Event:2"
 * event with the given wall time. */
rl_tb_writer *rl_tb_writer_open(const char *path, double wall_time);
/* One Event at `step` whose Summary holds one simple_value (a float) per
 * tag, in order. */
int rl_tb_writer_scalars(rl_tb_writer *w, int64_t step, double wall_time,
                         const char *const *tags, const double *values, int n);
int rl_tb_writer_flush(rl_tb_writer *w);
/* Flushes, fsyncs, closes and frees. */
int rl_tb_writer_close(rl_tb_writer *w);

typedef struct rl_tb_scalar {
    int64_t step;
    double wall_time;
    char *tag;
    float value;
} rl_tb_scalar;

/* Reads every simple_value of an event file, in file order. *file_version
 * (may be NULL) receives a malloc'd copy of the file_version string of the
 * first event, or NULL if it has none. */
int rl_tb_read_scalars(const char *path, rl_tb_scalar **out, int64_t *n, char **file_version);
void rl_tb_scalars_free(rl_tb_scalar *v, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
