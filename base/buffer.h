/* A growable byte buffer (source text, code objects, logs). */
#ifndef CKJIT_RUNTIME_BASE_BUFFER_H
#define CKJIT_RUNTIME_BASE_BUFFER_H

#include <stddef.h>

typedef struct ckjit_buffer {
  char *data; /* NUL-terminated when used for text */
  size_t size;
  size_t cap;
} ckjit_buffer;

/* Each returns 0 on success, -1 when out of memory (buffer unchanged). */
int ckjit__buf_append(ckjit_buffer *b, const void *data, size_t n);
int ckjit__buf_append_str(ckjit_buffer *b, const char *s);
void ckjit__buf_free(ckjit_buffer *b);

/* Copies a string into a fixed array, truncating; always NUL-terminates. */
void ckjit__copy_str(char *dst, size_t size, const char *src);

#endif
