/* libFuzzer target: the size and count parsers of CKJIT_CACHE_MAX_SIZE,
 * CKJIT_CACHE_MAX_ENTRIES and ckjit-cache prune (cache/settings.c), on
 * arbitrary bytes (read as a C string: up to the first NUL).
 *
 * Each input is judged a second time by a slow reference built another
 * way: the grammar by a POSIX regular expression, the value by decimal
 * string arithmetic (the digits doubled once per power of two, then the
 * fraction's digits dropped).  The parser must accept exactly what the
 * reference accepts, with the same value; a refusal must leave the output
 * untouched and give a reason.  Sanitizers catch any undefined behaviour
 * (the old parser's float-to-integer cast of ".5e99"). */
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/settings.h"

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "fuzz_size: check failed: %s (line %d)\n", #cond, __LINE__); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

static const char *const size_pattern =
    "^([0-9]+|[0-9]+(\\.[0-9]{1,18})?[KkMmGgTt](iB)?)$";
static const char *const count_pattern = "^[0-9]+$";
static const char *const limit = "9223372036854775807"; /* 2^63-1 */

/* Compiled once per process (kept: libFuzzer calls the target millions of times). */
static int matches(const char *pattern, const char *text) {
  static regex_t size_re, count_re;
  static int compiled;
  if (!compiled) {
    CHECK(regcomp(&size_re, size_pattern, REG_EXTENDED | REG_NOSUB) == 0);
    CHECK(regcomp(&count_re, count_pattern, REG_EXTENDED | REG_NOSUB) == 0);
    compiled = 1;
  }
  return regexec(pattern == size_pattern ? &size_re : &count_re, text, 0, NULL, 0) == 0;
}

/* Decimal digits of floor(digits * 2^shift / 10^drop), without leading
 * zeros ("0" for zero), into a malloc'ed string. */
static char *reference_value(const char *digits, size_t n, int shift, size_t drop) {
  size_t cap = n + 16; /* 2^40 adds at most 13 digits */
  char *d = calloc(cap + 1, 1);
  CHECK(d != NULL);
  /* d holds the number right-aligned, most significant digit first. */
  memset(d, '0', cap);
  memcpy(d + cap - n, digits, n);
  for (int i = 0; i < shift; i++) {
    int carry = 0;
    for (size_t k = cap; k-- > 0;) {
      int x = (d[k] - '0') * 2 + carry;
      d[k] = (char)('0' + x % 10);
      carry = x / 10;
    }
    CHECK(carry == 0);
  }
  d[cap - drop] = '\0';
  size_t start = 0;
  while (d[start] == '0' && d[start + 1]) start++;
  if (!d[start]) {
    d[0] = '0', d[1] = '\0';
    return d;
  }
  memmove(d, d + start, strlen(d + start) + 1);
  return d;
}

/* 1 when the decimal string `a` (no leading zeros) is greater than `b`. */
static int greater(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  return la != lb ? la > lb : strcmp(a, b) > 0;
}

static void check_size(const char *text) {
  uint64_t v = 0xfeedfacecafebeefull;
  const char *why = NULL;
  int rc = ckjit__parse_size(text, &v, &why);
  if (!matches(size_pattern, text)) {
    CHECK(rc == -1);
  } else {
    /* Split NUMBER[.FRACTION][UNIT[iB]] into its digits and power of two. */
    size_t whole = strspn(text, "0123456789");
    size_t frac = text[whole] == '.' ? strspn(text + whole + 1, "0123456789") : 0;
    const char *unit = text + whole + (frac ? frac + 1 : 0);
    int shift = 0;
    switch (*unit) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
    }
    char *digits = malloc(whole + frac + 1);
    CHECK(digits != NULL);
    memcpy(digits, text, whole);
    memcpy(digits + whole, text + whole + 1, frac);
    digits[whole + frac] = '\0';
    char *want = reference_value(digits, whole + frac, shift, frac);
    /* Never NULL (reference_value checks), but GCC -O2 with UBSan fails the
     * build (-Wformat-overflow) on a NULL `want` printed below without this. */
    CHECK(want != NULL);
    int nonzero = strspn(digits, "0") != whole + frac;
    if (greater(want, limit) || (!strcmp(want, "0") && nonzero)) {
      CHECK(rc == -1);
    } else {
      CHECK(rc == 0);
      char got[32];
      snprintf(got, sizeof got, "%llu", (unsigned long long)v);
      if (strcmp(got, want)) fprintf(stderr, "fuzz_size: \"%s\" = %s, want %s\n", text, got, want);
      CHECK(strcmp(got, want) == 0);
    }
    free(want);
    free(digits);
  }
  if (rc == -1) {
    CHECK(v == 0xfeedfacecafebeefull);
    CHECK(why != NULL && *why);
  }
}

static void check_count(const char *text) {
  uint64_t v = 0xfeedfacecafebeefull;
  const char *why = NULL;
  int rc = ckjit__parse_count(text, &v, &why);
  int ok = matches(count_pattern, text);
  if (ok) {
    size_t n = strlen(text);
    char *want = reference_value(text, n, 0, 0);
    ok = !greater(want, limit);
    if (ok) {
      CHECK(rc == 0);
      char got[32];
      snprintf(got, sizeof got, "%llu", (unsigned long long)v);
      CHECK(strcmp(got, want) == 0);
    }
    free(want);
  }
  if (!ok) {
    CHECK(rc == -1);
    CHECK(v == 0xfeedfacecafebeefull);
    CHECK(why != NULL && *why);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  check_size(text);
  check_count(text);
  free(text);
  return 0;
}
