/* Reading a whole file into memory, for the tools' inputs (manifests,
 * cache entries, code objects). */
#ifndef CKJIT_TOOLS_FILE_READ_H
#define CKJIT_TOOLS_FILE_READ_H

#include <stddef.h>

enum {
  FILE_READ_STDIN = 1,    /* "-" is standard input */
  FILE_READ_NOFOLLOW = 2, /* a symbolic link is refused (ELOOP) */
  FILE_READ_REGULAR = 4   /* only a regular file (else EINVAL; a pipe, as
                             from the shell's <(...), is read otherwise) */
};

/* The bytes of `path`, at most `max` of them (0: no limit; more is EFBIG),
 * in a malloc'ed buffer with a NUL after them (not counted in *len).  NULL
 * on failure, with the errno value in *err (a directory: EISDIR). */
char *file_read_all(const char *path, int flags, size_t max, size_t *len, int *err);

#endif
