/* common/schema/sections.h — every config section rlrt knows, in the order
 * docs/CONFIG.md lists them (rl-driver config-doc writes it). A new section
 * is its header and .c file in common/schema/ plus one line in sections.c. */
#ifndef RLRT_SCHEMA_SECTIONS_H
#define RLRT_SCHEMA_SECTIONS_H

#include <stddef.h>

#include "rlrt/config.h"

/* NULL-terminated */
extern const rl_config_section *const rl_schema_sections[];

#endif
