#include "layout.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

int ckjit__cache_name_is_subdir(const char *name) {
  return is_lower_hex(name[0]) && is_lower_hex(name[1]) && name[2] == '\0';
}

int ckjit__cache_name_is_entry(const char *name, char key_hex[33]) {
  for (int i = 0; i < 32; i++)
    if (!is_lower_hex(name[i])) return 0;
  if (strcmp(name + 32, ".ckjit") != 0) return 0;
  if (key_hex) {
    memcpy(key_hex, name, 32);
    key_hex[32] = '\0';
  }
  return 1;
}

/* Accepts 1+ characters of [0-9] (digits) or [0-9a-f] (hex); returns the end. */
static const char *skip_run(const char *p, int hex) {
  const char *b = p;
  while (hex ? is_lower_hex(*p) : (*p >= '0' && *p <= '9')) p++;
  return p > b ? p : NULL;
}

int ckjit__cache_name_is_temp(const char *name) {
  if (strncmp(name, CKJIT_CACHE_TEMP_PREFIX, 5) != 0) return 0;
  const char *p = name + 5;
  for (int i = 0; i < 32; i++)
    if (!is_lower_hex(p[i])) return 0;
  p += 32;
  if (*p++ != '-' || !(p = skip_run(p, 0))) return 0;
  if (*p++ != '-' || !(p = skip_run(p, 1))) return 0;
  if (*p++ != '-' || !(p = skip_run(p, 0))) return 0;
  return *p == '\0';
}

void ckjit__cache_temp_name(const char *hex, char *out, size_t len) {
  static _Atomic unsigned counter;
  snprintf(out, len, CKJIT_CACHE_TEMP_PREFIX "%.32s-%ld-%lx-%u", hex, (long)getpid(),
           (unsigned long)pthread_self(), atomic_fetch_add(&counter, 1));
}
