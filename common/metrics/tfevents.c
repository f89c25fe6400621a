/* tfevents.c — CRC32C, TFRecord framing and TensorBoard scalar events. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlrt/error.h"
#include "common/metrics/metrics.h"
#include "common/core/util.h"
#include "tensorboard.pb-c.h"

/* ---- CRC32C ------------------------------------------------------------------ */

static uint32_t s_crc_table[256];
static pthread_once_t s_crc_once = PTHREAD_ONCE_INIT;

static void s_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        s_crc_table[i] = c;
    }
}

uint32_t rl_crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&s_crc_once, s_crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++)
        crc = s_crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t rl_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- TFRecord ------------------------------------------------------------------ */

static void s_le64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static void s_le32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t s_rd64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

static uint32_t s_rd32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

int rl_tfrecord_write(FILE *f, const void *data, size_t len)
{
    if (!f || (len && !data))
        return rl_error_set(RL_EINVAL, "rl_tfrecord_write: NULL argument");
    unsigned char head[12], tail[4];
    s_le64(head, (uint64_t)len);
    s_le32(head + 8, rl_crc32c_mask(rl_crc32c(0, head, 8)));
    s_le32(tail, rl_crc32c_mask(rl_crc32c(0, data, len)));
    if (fwrite(head, 1, 12, f) != 12 || (len && fwrite(data, 1, len, f) != len) ||
        fwrite(tail, 1, 4, f) != 4)
        return rl_error_set(RL_EIO, "rl_tfrecord_write: write failed: %s", strerror(errno));
    return RL_OK;
}

int rl_tfrecord_read(FILE *f, void **data, size_t *len)
{
    if (!f || !data || !len)
        return rl_error_set(RL_EINVAL, "rl_tfrecord_read: NULL argument");
    *data = NULL;
    *len = 0;
    long at = ftell(f);
    unsigned char head[12], tail[4];
    size_t got = fread(head, 1, 12, f);
    if (got == 0 && feof(f))
        return 0;
    if (got != 12)
        return rl_error_set(RL_EPROTO, "tfrecord at byte %ld: truncated header (%zu of 12 "
                                       "bytes)", at, got);
    if (s_rd32(head + 8) != rl_crc32c_mask(rl_crc32c(0, head, 8)))
        return rl_error_set(RL_EPROTO, "tfrecord at byte %ld: length CRC mismatch", at);
    uint64_t n = s_rd64(head);
    if (n > ((uint64_t)1 << 31))
        return rl_error_set(RL_EPROTO, "tfrecord at byte %ld: length %" PRIu64 " too large",
                            at, n);
    unsigned char *buf = malloc(n ? (size_t)n : 1);
    if (!buf)
        return rl_error_set(RL_ENOMEM, "tfrecord at byte %ld: out of memory", at);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n || fread(tail, 1, 4, f) != 4) {
        free(buf);
        return rl_error_set(RL_EPROTO, "tfrecord at byte %ld: truncated data (%" PRIu64
                                       " bytes announced)", at, n);
    }
    if (s_rd32(tail) != rl_crc32c_mask(rl_crc32c(0, buf, (size_t)n))) {
        free(buf);
        return rl_error_set(RL_EPROTO, "tfrecord at byte %ld: data CRC mismatch", at);
    }
    *data = buf;
    *len = (size_t)n;
    return 1;
}

/* ---- event writer ------------------------------------------------------------------ */

struct rl_tb_writer {
    FILE *f;
    char *path;
};

static int s_write_event(rl_tb_writer *w, const Tensorboard__Event *ev)
{
    size_t n = tensorboard__event__get_packed_size(ev);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return rl_error_set(RL_ENOMEM, "tensorboard event: out of memory");
    tensorboard__event__pack(ev, buf);
    int rc = rl_tfrecord_write(w->f, buf, n);
    free(buf);
    if (rc)
        return rl_error_wrap(rc, "%s", w->path);
    return RL_OK;
}

rl_tb_writer *rl_tb_writer_open(const char *path, double wall_time)
{
    if (!path) {
        rl_error_set(RL_EINVAL, "rl_tb_writer_open: path is NULL");
        return NULL;
    }
    rl_tb_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        rl_error_set(RL_ENOMEM, "rl_tb_writer_open: out of memory");
        return NULL;
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        rl_error_set(RL_EIO, "%s: cannot create: %s", path, strerror(errno));
        free(w->path);
        free(w);
        return NULL;
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)"brain.Event:2";
    if (s_write_event(w, &ev) || rl_tb_writer_flush(w)) {
        int code = rl_error_code();
        rl_tb_writer_close(w);
        rl_error_set(code, "%s", rl_error_message());
        return NULL;
    }
    return w;
}

int rl_tb_writer_scalars(rl_tb_writer *w, int64_t step, double wall_time,
                         const char *const *tags, const double *values, int n)
{
    if (!w || n < 0 || (n > 0 && (!tags || !values)))
        return rl_error_set(RL_EINVAL, "rl_tb_writer_scalars: NULL argument or n %d", n);
    Tensorboard__Summary__Value *vals = calloc(n ? (size_t)n : 1, sizeof *vals);
    Tensorboard__Summary__Value **ptrs = calloc(n ? (size_t)n : 1, sizeof *ptrs);
    if (!vals || !ptrs) {
        free(vals);
        free(ptrs);
        return rl_error_set(RL_ENOMEM, "rl_tb_writer_scalars: out of memory");
    }
    for (int i = 0; i < n; i++) {
        tensorboard__summary__value__init(&vals[i]);
        vals[i].tag = (char *)tags[i];
        vals[i].value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        vals[i].simple_value = (float)values[i];
        ptrs[i] = &vals[i];
    }
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = (size_t)n;
    sum.value = ptrs;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    int rc = s_write_event(w, &ev);
    free(vals);
    free(ptrs);
    return rc;
}

int rl_tb_writer_flush(rl_tb_writer *w)
{
    if (!w)
        return rl_error_set(RL_EINVAL, "rl_tb_writer_flush: writer is NULL");
    if (fflush(w->f) != 0)
        return rl_error_set(RL_EIO, "%s: flush failed: %s", w->path, strerror(errno));
    return RL_OK;
}

int rl_tb_writer_close(rl_tb_writer *w)
{
    if (!w)
        return RL_OK;
    int rc = RL_OK;
    if (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0)
        rc = rl_error_set(RL_EIO, "%s: flush/fsync failed: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && rc == RL_OK)
        rc = rl_error_set(RL_EIO, "%s: close failed: %s", w->path, strerror(errno));
    free(w->path);
    free(w);
    return rc;
}

/* ---- reader ------------------------------------------------------------------------ */

void rl_tb_scalars_free(rl_tb_scalar *v, int64_t n)
{
    if (!v)
        return;
    for (int64_t i = 0; i < n; i++)
        free(v[i].tag);
    free(v);
}

int rl_tb_read_scalars(const char *path, rl_tb_scalar **out, int64_t *n, char **file_version)
{
    if (!path || !out || !n)
        return rl_error_set(RL_EINVAL, "rl_tb_read_scalars: NULL argument");
    *out = NULL;
    *n = 0;
    if (file_version)
        *file_version = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO, "%s: cannot open: %s",
                            path, strerror(errno));
    rl_tb_scalar *v = NULL;
    int64_t cnt = 0, cap = 0, rec = 0;
    int rc = RL_OK;
    for (;;) {
        void *data;
        size_t len;
        int r = rl_tfrecord_read(f, &data, &len);
        if (r == 0)
            break;
        if (r < 0) {
            rc = rl_error_wrap(r, "%s", path);
            break;
        }
        Tensorboard__Event *ev = tensorboard__event__unpack(NULL, len, data);
        free(data);
        if (!ev) {
            rc = rl_error_set(RL_EPROTO, "%s: record %" PRId64 " is not an Event", path, rec);
            break;
        }
        if (rec == 0 && file_version && ev->what_case == TENSORBOARD__EVENT__WHAT_FILE_VERSION)
            *file_version = strdup(ev->file_version);
        if (ev->what_case == TENSORBOARD__EVENT__WHAT_SUMMARY) {
            for (size_t i = 0; i < ev->summary->n_value && rc == RL_OK; i++) {
                const Tensorboard__Summary__Value *sv = ev->summary->value[i];
                if (sv->value_case != TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE)
                    continue;
                if (cnt == cap) {
                    int64_t nc = cap ? cap * 2 : 16;
                    rl_tb_scalar *nv = realloc(v, (size_t)nc * sizeof *nv);
                    if (!nv) {
                        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", path);
                        break;
                    }
                    v = nv;
                    cap = nc;
                }
                v[cnt] = (rl_tb_scalar){ev->step, ev->wall_time, strdup(sv->tag),
                                        sv->simple_value};
                cnt++;
            }
        }
        tensorboard__event__free_unpacked(ev, NULL);
        rec++;
        if (rc)
            break;
    }
    fclose(f);
    if (rc) {
        rl_tb_scalars_free(v, cnt);
        if (file_version) {
            free(*file_version);
            *file_version = NULL;
        }
        return rc;
    }
    *out = v;
    *n = cnt;
    return RL_OK;
}

/* Used by the sink on resume: copies `path` keeping only records whose event
 * has no summary or a step <= keep_step; stops at the first bad record (a
 * torn tail). Rewrites atomically. */
/* Keeps the records before the first summary past keep_step; a torn or
 * corrupt tail ends the copy (the valid prefix stays). */
static int s_keep_events(FILE *in, FILE *out, const char *tmp, void *ctx)
{
    (void)tmp;
    int64_t keep_step = *(const int64_t *)ctx;
    int rc = RL_OK;
    for (;;) {
        void *data;
        size_t len;
        int r = rl_tfrecord_read(in, &data, &len);
        if (r <= 0)
            break; /* end or torn/corrupt tail: keep the valid prefix */
        Tensorboard__Event *ev = tensorboard__event__unpack(NULL, len, data);
        int keep = ev && (ev->what_case != TENSORBOARD__EVENT__WHAT_SUMMARY ||
                          ev->step <= keep_step);
        if (ev)
            tensorboard__event__free_unpacked(ev, NULL);
        if (keep)
            rc = rl_tfrecord_write(out, data, len);
        free(data);
        if (rc || !ev)
            break;
    }
    return rc;
}

int rl__tb_truncate_file(const char *path, int64_t keep_step)
{
    return rl_file_rewrite(path, 0, s_keep_events, &keep_step);
}
