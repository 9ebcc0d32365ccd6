/* Kernel sources from kernel_src/, embedded at build time (see meson.build). */
#ifndef CKJIT_RUNTIME_EMBEDDED_H
#define CKJIT_RUNTIME_EMBEDDED_H

#include <stddef.h>

typedef struct ckjit_embedded_file {
  const char *name; /* path below kernel_src/, e.g. "elementwise/elementwise.cu" */
  const char *data; /* NUL-terminated contents */
  size_t size;
} ckjit_embedded_file;

extern const ckjit_embedded_file ckjit__embedded_files[];
extern const size_t ckjit__embedded_count;
/* The headers (*.h) among them, in the same order (generated too). */
extern const char *const ckjit__embedded_header_names[];
extern const char *const ckjit__embedded_header_sources[];
extern const int ckjit__embedded_header_count;

/* NULL when no such file was embedded. */
const ckjit_embedded_file *ckjit__embedded_find(const char *name);

/* Every embedded header (*.h), in a fixed order: they are passed to each
 * compile and hashed into every cache key. */
int ckjit__embedded_headers(const char *const **names, const char *const **sources);

#endif
