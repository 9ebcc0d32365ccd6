/* What the parent (test_concurrency_compile.c) and the child processes
 * (concurrency_compile_child.c) of test_concurrency_compile share: the
 * sizes, the spec set (computed the same way in both) and the check of one
 * cache entry, which each child applies to its answers and the parent to
 * every file left in the cache. */
#ifndef CKJIT_TESTS_COMPILE_CONCURRENCY_COMPILE_H
#define CKJIT_TESTS_COMPILE_CONCURRENCY_COMPILE_H

#include <stddef.h>

enum { NPROC = 8, NTHREAD = 4, NSPEC = 24 };

/* The spec set, filled by pick_specs: 0, or -1 (with a message) when the
 * default set has fewer than NSPEC portable specs. */
extern char g_specs[NSPEC][256];
int pick_specs(void);

/* Checks <cache>/xx/<key>.ckjit: decodes with that key, right arch, kernel
 * and size.  Returns NULL or what is wrong (in why). */
const char *check_entry_file(const char *cache, const char *hex, const char *arch,
                             const char *kernel, size_t code_size, char *why, size_t len);

/* A child process: argv as in concurrency_compile_child.c; its exit status. */
int child_main(char **argv);

#endif
