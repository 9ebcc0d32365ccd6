/* ckjit-cache's help texts (cache_help.c). */
#ifndef CKJIT_TOOLS_CACHE_HELP_H
#define CKJIT_TOOLS_CACHE_HELP_H

#include <stdio.h>

/* The options any command takes, and the exit statuses. */
extern const char cache_common_help[];
/* The usage: the commands and the common options. */
void cache_usage(FILE *out);
/* The help of command `name`; NULL: no such command. */
const char *cache_command_help(const char *name);

#endif
