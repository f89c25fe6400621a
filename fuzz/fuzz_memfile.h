/* fuzz/fuzz_memfile.h — the fuzz targets of decoders that read a path (JSONL
 * datasets, job YAML, trainer_state.json) hand them the input as a file:
 * an in-memory file (memfd) whose /proc/self/fd path the decoder opens. */
#ifndef RLRT_FUZZ_MEMFILE_H
#define RLRT_FUZZ_MEMFILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to a new memfd; path gets "/proc/self/fd/N". -1 on failure. */
static inline int rl_fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t psize)
{
    int fd = memfd_create("rlrt-fuzz", 0);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    snprintf(path, psize, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
