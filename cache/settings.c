#include "settings.h"

#include <stdlib.h>
#include <string.h>

#include "../base/log.h"
#include "layers.h"

/* Everything here is integer arithmetic: a size is a count of bytes, and a
 * detour through double rounds large values and turns "1.5e3" or ".5e99"
 * into a number (or into undefined behaviour). */

#define SIZE_LIMIT ((uint64_t)INT64_MAX)

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Reads a run of digits into *value, refusing any prefix above SIZE_LIMIT.
 * Returns the number of digits, or -1 on overflow. */
static int read_digits(const char **p, uint64_t *value) {
  int n = 0;
  uint64_t v = 0;
  while (is_digit(**p)) {
    unsigned d = (unsigned)(**p - '0');
    if (v > (SIZE_LIMIT - d) / 10) return -1;
    v = v * 10 + d;
    (*p)++;
    n++;
  }
  *value = v;
  return n;
}

/* floor(fraction / 10^digits * 2^shift), by binary long division: exact for
 * any fraction below 10^digits (digits <= 18, so 2 * 10^18 fits). */
static uint64_t scaled_fraction(uint64_t fraction, int digits, int shift) {
  uint64_t denominator = 1;
  for (int i = 0; i < digits; i++) denominator *= 10;
  uint64_t quotient = 0, remainder = fraction;
  for (int bit = 0; bit < shift; bit++) {
    remainder *= 2;
    quotient *= 2;
    if (remainder >= denominator) {
      remainder -= denominator;
      quotient++;
    }
  }
  return quotient;
}

static int refuse(const char **why, const char *reason) {
  if (why) *why = reason;
  return -1;
}

int ckjit__parse_size(const char *text, uint64_t *out, const char **why) {
  if (!text || !*text) return refuse(why, "empty");
  const char *p = text;
  uint64_t whole;
  int whole_digits = read_digits(&p, &whole);
  if (whole_digits < 0) return refuse(why, "more than 2^63-1 bytes");
  if (whole_digits == 0) return refuse(why, "does not start with a digit");
  uint64_t fraction = 0;
  int fraction_digits = 0;
  if (*p == '.') {
    p++;
    while (is_digit(*p)) {
      if (fraction_digits == CKJIT_SIZE_MAX_FRACTION_DIGITS)
        return refuse(why, "more than 18 digits after the point");
      fraction = fraction * 10 + (uint64_t)(*p++ - '0');
      fraction_digits++;
    }
    if (fraction_digits == 0) return refuse(why, "no digit after the point");
  }
  int shift = 0;
  switch (*p) {
  case 'K': case 'k': shift = 10; break;
  case 'M': case 'm': shift = 20; break;
  case 'G': case 'g': shift = 30; break;
  case 'T': case 't': shift = 40; break;
  default: break;
  }
  if (shift) {
    p++;
    if (p[0] == 'i' && p[1] == 'B') p += 2;
  }
  if (*p)
    return refuse(why, "unexpected characters after the number (no blank, exponent, B or KB; "
                       "only K, M, G or T, optionally followed by iB)");
  if (fraction_digits && !shift)
    return refuse(why, "a fraction needs a K, M, G or T suffix (a size without one is whole "
                       "bytes)");
  if (whole > SIZE_LIMIT >> shift) return refuse(why, "more than 2^63-1 bytes");
  uint64_t bytes = (whole << shift) + scaled_fraction(fraction, fraction_digits, shift);
  if (bytes > SIZE_LIMIT) return refuse(why, "more than 2^63-1 bytes");
  /* 0 means "no bound": only a written zero may say that, never a small
   * fraction rounded down ("0.0001K"). */
  if (bytes == 0 && (whole || fraction))
    return refuse(why, "less than one byte (write 0 for no bound)");
  *out = bytes;
  return 0;
}

int ckjit__parse_count(const char *text, uint64_t *out, const char **why) {
  if (!text || !*text) return refuse(why, "empty");
  const char *p = text;
  uint64_t v;
  int digits = read_digits(&p, &v);
  if (digits < 0) return refuse(why, "more than 2^63-1");
  if (digits == 0 || *p) return refuse(why, "not a decimal number (digits only)");
  *out = v;
  return 0;
}

/* Each bad variable is warned about once per process: the library and a
 * tool (ckjit-cache) may both read the limits. */
static int warned_size, warned_entries;

static int first_warning(int *flag) { return !__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED); }

void ckjit__disk_env_limits(uint64_t *max_bytes, uint64_t *max_entries) {
  *max_bytes = CKJIT_DISK_DEFAULT_MAX_BYTES;
  *max_entries = CKJIT_DISK_DEFAULT_MAX_ENTRIES;
  const char *why = "";
  const char *v = getenv("CKJIT_CACHE_MAX_SIZE");
  if (v && *v && ckjit__parse_size(v, max_bytes, &why) != 0) {
    *max_bytes = CKJIT_DISK_DEFAULT_MAX_BYTES;
    if (first_warning(&warned_size))
      CKJIT_WARN("CKJIT_CACHE_MAX_SIZE=%s is not a size: %s (expected %s); using the default, 1G",
                 v, why, CKJIT_SIZE_GRAMMAR);
  }
  v = getenv("CKJIT_CACHE_MAX_ENTRIES");
  if (v && *v && ckjit__parse_count(v, max_entries, &why) != 0) {
    *max_entries = CKJIT_DISK_DEFAULT_MAX_ENTRIES;
    if (first_warning(&warned_entries))
      CKJIT_WARN("CKJIT_CACHE_MAX_ENTRIES=%s is not a count: %s; using the default, %u", v, why,
                 CKJIT_DISK_DEFAULT_MAX_ENTRIES);
  }
}

void ckjit__disk_configure_env(ckjit_disk_cache *c) {
  ckjit__disk_env_limits(&c->max_bytes, &c->max_entries);
  const char *path = getenv("CKJIT_CACHE_PATH");
  if (path && *path) ckjit__disk_add_layers(c, path);
  ckjit__remote_config_env(&c->remote);
}
