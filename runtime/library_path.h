/* Finding vendor libraries without loading them.
 *
 * Loading NVRTC or hipRTC costs far more than a warm start may take
 * (bench/NOTES.md #3), yet the cache key needs the compiler's identity.  So ckjit resolves
 * the library file itself, takes its identity from the file (name, size,
 * GNU build-id, or the mtime where it has none), and dlopens exactly that
 * file later, only on a cache miss. */
#ifndef CKJIT_RUNTIME_LIBRARY_PATH_H
#define CKJIT_RUNTIME_LIBRARY_PATH_H

#include <stddef.h>

/* Searches, for each of `names` in turn: `env_override` (a file path from the
 * environment, if set), LD_LIBRARY_PATH, the system library directories and
 * `extra_dirs`.  Writes the canonical path of the first regular file found.
 * Returns 0, or -1 when none exists. */
int ckjit__find_library(const char *const *names, const char *const *extra_dirs,
                        const char *env_override, char *out, size_t len);

/* "libnvrtc size=109338064 build-id=65be0db3...": the identity of a
 * library file for the cache key (the stem of its name, its size and GNU
 * build-id; "libnvrtc.so.13.0.88 size=109338064 mtime=1760564160", the
 * whole name and the mtime, for a file without a build-id note). */
void ckjit__library_identity(const char *path, char *out, size_t len);

/* Major and minor version from a soname-style file name ("libx.so.13.0.88"
 * -> 13, 0).  Both 0 when the name carries no version. */
void ckjit__library_version(const char *path, int *major, int *minor);

/* dlopens the first of `names` (NULL-terminated) that loads, for the life
 * of the process, and writes its name into `path` (may be NULL).  NULL
 * when none loads. */
void *ckjit__library_open_first(const char *const *names, char *path, size_t len);

#endif
