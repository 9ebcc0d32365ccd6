/* ckjit-cache export / import (cache_archive_cmd.c). */
#ifndef CKJIT_TOOLS_CACHE_ARCHIVE_CMD_H
#define CKJIT_TOOLS_CACHE_ARCHIVE_CMD_H

/* Export the cache directory `dir` into the archive `file` ("-": stdout),
 * or import `file` ("-": stdin) into it; `json`: the report as JSON on
 * stdout.  The exit status of the command: 0, 1 (failure or bad entries),
 * 2 (usage). */
int cache_cmd_export(const char *file, int json, const char *dir);
int cache_cmd_import(const char *file, int json, const char *dir);

#endif
