#include "embedded.h"

#include <string.h>

const ckjit_embedded_file *ckjit__embedded_find(const char *name) {
  for (size_t i = 0; i < ckjit__embedded_count; i++)
    if (!strcmp(ckjit__embedded_files[i].name, name)) return &ckjit__embedded_files[i];
  return NULL;
}

int ckjit__embedded_headers(const char *const **names, const char *const **sources) {
  *names = ckjit__embedded_header_names;
  *sources = ckjit__embedded_header_sources;
  return ckjit__embedded_header_count;
}
