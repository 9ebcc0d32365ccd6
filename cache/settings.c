#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../runtime/log.h"
#include "layers.h"

int ckjit__parse_size(const char *text, uint64_t *out) {
  if (!text) return -1;
  while (isspace((unsigned char)*text)) text++;
  if (!isdigit((unsigned char)*text) && *text != '.') return -1;
  /* Whole part exactly (sizes past 2^53 must not round), then a fraction. */
  char *end = (char *)text;
  unsigned long long whole = 0;
  if (isdigit((unsigned char)*text)) {
    errno = 0;
    whole = strtoull(text, &end, 10);
    if (errno) return -1;
  }
  double frac = 0;
  if (*end == '.') {
    const char *f = end + 1;
    if (!isdigit((unsigned char)*f)) return -1;
    frac = strtod(end, &end);
  }
  uint64_t mult = 1;
  switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    default: break;
  }
  if (mult > 1 && (*end == 'i' || *end == 'I') && (end[1] == 'b' || end[1] == 'B')) end += 2;
  else if (*end == 'b' || *end == 'B') end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end) return -1;
  if (whole > (UINT64_MAX >> 1) / mult) return -1;
  uint64_t v = (uint64_t)whole * mult + (uint64_t)(frac * (double)mult);
  if (v > (UINT64_MAX >> 1)) return -1;
  *out = v;
  return 0;
}

int ckjit__parse_count(const char *text, uint64_t *out) {
  if (!text) return -1;
  while (isspace((unsigned char)*text)) text++;
  if (!isdigit((unsigned char)*text)) return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(text, &end, 10);
  while (isspace((unsigned char)*end)) end++;
  if (errno || *end || v > (UINT64_MAX >> 1)) return -1;
  *out = v;
  return 0;
}

void ckjit__disk_env_limits(uint64_t *max_bytes, uint64_t *max_entries) {
  *max_bytes = CKJIT_DISK_DEFAULT_MAX_BYTES;
  *max_entries = CKJIT_DISK_DEFAULT_MAX_ENTRIES;
  const char *v = getenv("CKJIT_CACHE_MAX_SIZE");
  if (v && *v && ckjit__parse_size(v, max_bytes) != 0) {
    *max_bytes = CKJIT_DISK_DEFAULT_MAX_BYTES;
    CKJIT_WARN("CKJIT_CACHE_MAX_SIZE=%s is not a size (bytes, or a number with K, M, G or T); "
               "using the default, 1G",
               v);
  }
  v = getenv("CKJIT_CACHE_MAX_ENTRIES");
  if (v && *v && ckjit__parse_count(v, max_entries) != 0) {
    *max_entries = CKJIT_DISK_DEFAULT_MAX_ENTRIES;
    CKJIT_WARN("CKJIT_CACHE_MAX_ENTRIES=%s is not a number; using the default, %u", v,
               CKJIT_DISK_DEFAULT_MAX_ENTRIES);
  }
}

void ckjit__disk_configure_env(ckjit_disk_cache *c) {
  ckjit__disk_env_limits(&c->max_bytes, &c->max_entries);
  const char *path = getenv("CKJIT_CACHE_PATH");
  if (path && *path) ckjit__disk_add_layers(c, path);
}
