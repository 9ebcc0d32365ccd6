#include "embedded.h"

#include <pthread.h>
#include <string.h>

const ckjit_embedded_file *ckjit__embedded_find(const char *name) {
  for (size_t i = 0; i < ckjit__embedded_count; i++)
    if (!strcmp(ckjit__embedded_files[i].name, name)) return &ckjit__embedded_files[i];
  return NULL;
}

#define MAX_HEADERS 16
static const char *header_names[MAX_HEADERS];
static const char *header_sources[MAX_HEADERS];
static int header_count;
static pthread_once_t headers_once = PTHREAD_ONCE_INIT;

static void collect_headers(void) {
  for (size_t i = 0; i < ckjit__embedded_count && header_count < MAX_HEADERS; i++) {
    const char *name = ckjit__embedded_files[i].name;
    size_t len = strlen(name);
    if (len > 2 && !strcmp(name + len - 2, ".h")) {
      header_names[header_count] = name;
      header_sources[header_count] = ckjit__embedded_files[i].data;
      header_count++;
    }
  }
}

int ckjit__embedded_headers(const char *const **names, const char *const **sources) {
  pthread_once(&headers_once, collect_headers);
  *names = header_names;
  *sources = header_sources;
  return header_count;
}
