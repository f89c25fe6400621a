/* fuzz_job_yaml.c — libFuzzer target for a job file with command-line
 * overrides: rl_roles_job (parse, validate against the roles' sections, merge, apply `key=value` overrides typed by the defaults) and
 * the JSON round trip that CONFIGURE uses. One input is the job YAML, then
 * optionally a line "#overrides" followed by one override per line. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_memfile.h"
#include "rlrt/config.h"
#include "workers/contracts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t job_len = size;
    const char *ov[16];
    int n_ov = 0;
    char *mark = strstr(text, "\n#overrides\n");
    if (mark) {
        job_len = (size_t)(mark - text) + 1;
        for (char *line = strtok(mark + 12, "\n"); line && n_ov < 16; line = strtok(NULL, "\n"))
            ov[n_ov++] = line;
    }
    char path[64];
    int fd = rl_fuzz_memfile((const uint8_t *)text, job_len, path, sizeof path);
    if (fd >= 0) {
        rl_config *job = rl_roles_job(path, n_ov, ov);
        if (job) {
            char *json = rl_config_to_json(job, "");
            char *loc = json ? rl_config_locations_json(job) : NULL;
            if (json) { /* what a worker parses from CONFIGURE */
                rl_config *back = rl_config_parse_string(json, strlen(json), "<driver config>");
                if (!back)
                    abort(); /* the driver's own JSON must read back */
                if (loc)
                    (void)rl_config_apply_locations(back, loc, strlen(loc));
                rl_config_free(back);
            }
            free(loc);
            free(json);
            rl_config_free(job);
        }
        close(fd);
    }
    free(text);
    return 0;
}
