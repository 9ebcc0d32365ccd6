#include "buffer.h"

#include <stdlib.h>
#include <string.h>

int ckjit__buf_append(ckjit_buffer *b, const void *data, size_t n) {
  if (b->size + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->size + n + 1) {
      if (cap > ((size_t)-1) / 2) return -1;
      cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->size, data, n);
  b->size += n;
  b->data[b->size] = '\0';
  return 0;
}

int ckjit__buf_append_str(ckjit_buffer *b, const char *s) {
  return ckjit__buf_append(b, s, strlen(s));
}

void ckjit__buf_free(ckjit_buffer *b) {
  free(b->data);
  b->data = NULL;
  b->size = b->cap = 0;
}

void ckjit__copy_str(char *dst, size_t size, const char *src) {
  if (!size) return;
  size_t n = strnlen(src, size - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}
