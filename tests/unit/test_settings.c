/* Settings read from the environment: the size and count grammars of
 * CKJIT_CACHE_MAX_SIZE / CKJIT_CACHE_MAX_ENTRIES (and ckjit-cache prune's
 * --max-size / --max-entries), and the cache directory's choice and the
 * reason given when there is none (issue 15, items 6 and 12). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/disk_cache.h"
#include "cache/settings.h"

static void expect_size(const char *text, uint64_t want) {
  uint64_t v = 12345;
  const char *why = "(none)";
  int rc = ckjit__parse_size(text, &v, &why);
  if (rc != 0 || v != want)
    print_error("parse_size(\"%s\") = %d, %llu (%s); want %llu\n", text, rc, (unsigned long long)v,
                why, (unsigned long long)want);
  assert_int_equal(rc, 0);
  assert_int_equal(v, want);
}

static void expect_refused(const char *text) {
  uint64_t v = 12345;
  const char *why = NULL;
  int rc = ckjit__parse_size(text, &v, &why);
  if (rc == 0) print_error("parse_size(\"%s\") accepted: %llu\n", text, (unsigned long long)v);
  assert_int_equal(rc, -1);
  assert_int_equal(v, 12345); /* untouched */
  assert_non_null(why);
  assert_true(strlen(why) > 0);
}

static void test_size_accepts_the_grammar(void **state) {
  (void)state;
  expect_size("0", 0);
  expect_size("1", 1);
  expect_size("000", 0);
  expect_size("0010", 10);
  expect_size("1073741824", 1073741824ull);
  expect_size("64K", 64ull << 10);
  expect_size("64k", 64ull << 10);
  expect_size("512M", 512ull << 20);
  expect_size("2G", 2ull << 30);
  expect_size("2g", 2ull << 30);
  expect_size("1T", 1ull << 40);
  expect_size("0K", 0);
  expect_size("0.0G", 0);
  expect_size("1.5G", 3ull << 29);
  expect_size("0.5M", 1ull << 19);
  expect_size("10GiB", 10ull << 30);
  expect_size("1KiB", 1024);
  expect_size("1.5kiB", 1536);
  /* Fractions of a byte are rounded down, exactly (no double rounding). */
  expect_size("1.1K", 1126);     /* 1126.4 */
  expect_size("0.999K", 1022);   /* 1022.976 */
  expect_size("0.001K", 1);      /* 1.024 */
  expect_size("1.000000000000000001T", 1ull << 40);
  expect_size("0.999999999999999999T", (1ull << 40) - 1);
  expect_size("0.123456789012345678G", 132560717); /* 132560717.82 */
  /* The largest size, 2^63-1, in each form that reaches it or comes close. */
  expect_size("9223372036854775807", 9223372036854775807ull);
  expect_size("8388607T", 8388607ull << 40);
  expect_size("8388607.999999999999999999T", (8388608ull << 40) - 1);
  expect_size("8589934591.999999999999999999G", (8589934592ull << 30) - 1);
}

static void test_size_refuses_everything_else(void **state) {
  (void)state;
  /* The three: an exponent read as 501 bytes, a fraction of a byte
   * read as 0 (no bound), and a float-to-integer overflow. */
  expect_refused("1.5e3");
  expect_refused("0.5");
  expect_refused(".5e99");
  const char *bad[] = {
      "", "G", "K", "iB", "-1", "+1", "1X", "1GG", "1 G", " 3M", "3M ", "3M\n", "\t1", "1G B",
      "one", "1.", "1.G", ".5M", "1..5G", "1.5.5G", "1e9", "1E9", "1e", "0x10", "0b1", "1Gi",
      "1iB", "1GIB", "1Gib", "1GiBB", "1B", "100B", "1KB", "10GB", "1kb", "1P", "1E", "inf",
      "nan", "1,5G", "1_000", "1.5", "0.0", "0.1", "12.0",
      /* past 2^63-1 */
      "9223372036854775808", "99999999999999999999", "18446744073709551616", "8388608T",
      "9000000000T", "8589934592G", "8589934591.9999999999999999999G",
      /* a nonzero value that rounds to 0 bytes would mean "no bound" */
      "0.0001K", "0.000000000000000001T",
      /* more than 18 digits after the point */
      "1.0000000000000000000G",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_refused(bad[i]);
  uint64_t v;
  assert_int_equal(ckjit__parse_size(NULL, &v, NULL), -1);
  assert_int_equal(ckjit__parse_size("1e3", &v, NULL), -1); /* why may be NULL */
  /* Embedded NUL: only what comes before it is the value. */
  expect_size("5\0garbage", 5);
}

static void test_size_reasons(void **state) {
  (void)state;
  const char *why = NULL;
  uint64_t v;
  assert_int_equal(ckjit__parse_size("0.5", &v, &why), -1);
  assert_non_null(strstr(why, "fraction"));
  assert_int_equal(ckjit__parse_size("1.5e3", &v, &why), -1);
  assert_non_null(strstr(why, "exponent"));
  assert_int_equal(ckjit__parse_size("9223372036854775808", &v, &why), -1);
  assert_non_null(strstr(why, "2^63"));
  assert_int_equal(ckjit__parse_size("0.0001K", &v, &why), -1);
  assert_non_null(strstr(why, "0 for no bound"));
}

static void test_count(void **state) {
  (void)state;
  uint64_t v = 0;
  const char *why = NULL;
  assert_int_equal(ckjit__parse_count("50000", &v, &why), 0);
  assert_int_equal(v, 50000);
  assert_int_equal(ckjit__parse_count("0", &v, NULL), 0);
  assert_int_equal(v, 0);
  assert_int_equal(ckjit__parse_count("9223372036854775807", &v, NULL), 0);
  assert_int_equal(v, 9223372036854775807ull);
  const char *bad[] = {"", "5K", "-5", "+5", " 5", "5 ", "5\n", "5.0", "1e3", "0x10",
                       "9223372036854775808", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    v = 777;
    why = NULL;
    if (ckjit__parse_count(bad[i], &v, &why) == 0) print_error("count \"%s\" accepted\n", bad[i]);
    assert_int_equal(ckjit__parse_count(bad[i], &v, &why), -1);
    assert_int_equal(v, 777);
    assert_non_null(why);
  }
  assert_int_equal(ckjit__parse_count(NULL, &v, NULL), -1);
}

/* Invalid values leave the defaults; valid ones are taken. */
static void test_env_limits(void **state) {
  (void)state;
  uint64_t bytes, entries;
  const char *bad_sizes[] = {"1.5e3", "0.5", ".5e99", " 1G", "1GB"};
  for (size_t i = 0; i < sizeof bad_sizes / sizeof *bad_sizes; i++) {
    setenv("CKJIT_CACHE_MAX_SIZE", bad_sizes[i], 1);
    setenv("CKJIT_CACHE_MAX_ENTRIES", "12x", 1);
    ckjit__disk_env_limits(&bytes, &entries);
    assert_int_equal(bytes, CKJIT_DISK_DEFAULT_MAX_BYTES);
    assert_int_equal(entries, CKJIT_DISK_DEFAULT_MAX_ENTRIES);
  }
  setenv("CKJIT_CACHE_MAX_SIZE", "1.5K", 1);
  setenv("CKJIT_CACHE_MAX_ENTRIES", "12", 1);
  ckjit__disk_env_limits(&bytes, &entries);
  assert_int_equal(bytes, 1536);
  assert_int_equal(entries, 12);
  unsetenv("CKJIT_CACHE_MAX_SIZE");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
}

/* A path of `n` bytes: "/tmp/" then 'd's. */
static char *long_path(size_t n) {
  char *s = malloc(n + 1);
  /* abort, not assert_non_null: cmocka's assert returns as far as GCC
   * knows, and -O3 with ASan then fails the build (-Warray-bounds) on the
   * memset of a NULL s below. */
  if (!s) abort();
  memcpy(s, "/tmp/", 5);
  memset(s + 5, 'd', n - 5);
  s[n] = '\0';
  return s;
}

static void expect_no_dir(const char *override, const char *const *needles) {
  char out[CKJIT_PATH_MAX];
  assert_int_equal(ckjit__disk_default_dir(override, out, sizeof out), -1);
  assert_string_equal(out, ""); /* never a truncated path */
  for (const char *const *n = needles; *n; n++) {
    if (!strstr(ckjit_last_error(), *n))
      print_error("\"%s\" not in the reason: %s\n", *n, ckjit_last_error());
    assert_non_null(strstr(ckjit_last_error(), *n));
  }
}

/* Item 12: a setting too long for a cache directory is named as such, not
 * reported as "no cache directory". */
static void test_default_dir_reasons(void **state) {
  (void)state;
  char limit[32];
  snprintf(limit, sizeof limit, "at most %d bytes", CKJIT_PATH_MAX - 1);
  unsetenv("CKJIT_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  expect_no_dir(NULL, (const char *const[]){"CKJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "unset",
                                            NULL});

  char *p = long_path(5000);
  setenv("CKJIT_CACHE_DIR", p, 1);
  setenv("HOME", "/tmp", 1);
  expect_no_dir(NULL, (const char *const[]){"CKJIT_CACHE_DIR is 5000 bytes long", limit, NULL});
  /* One byte short of the limit fits; the limit itself does not. */
  free(p);
  p = long_path(CKJIT_PATH_MAX - 1);
  setenv("CKJIT_CACHE_DIR", p, 1);
  char out[CKJIT_PATH_MAX];
  assert_int_equal(ckjit__disk_default_dir(NULL, out, sizeof out), 0);
  assert_string_equal(out, p);
  free(p);
  p = long_path(CKJIT_PATH_MAX);
  setenv("CKJIT_CACHE_DIR", p, 1);
  expect_no_dir(NULL, (const char *const[]){"CKJIT_CACHE_DIR is 1024 bytes long", limit, NULL});
  unsetenv("CKJIT_CACHE_DIR");

  /* XDG_CACHE_HOME and HOME, with what is appended to them. */
  setenv("XDG_CACHE_HOME", p, 1);
  expect_no_dir(NULL, (const char *const[]){"XDG_CACHE_HOME is 1024 bytes long", "/ckjit", limit,
                                            NULL});
  unsetenv("XDG_CACHE_HOME");
  free(p);
  p = long_path(CKJIT_PATH_MAX - 5);
  setenv("HOME", p, 1);
  expect_no_dir(NULL, (const char *const[]){"HOME is 1019 bytes long", "/.cache/ckjit", limit,
                                            NULL});
  /* An explicit directory (--cache-dir, ckjit_options.cache_dir) is named as that. */
  free(p);
  p = long_path(4097);
  expect_no_dir(p, (const char *const[]){"--cache-dir", "4097 bytes long", limit, NULL});
  free(p);
  assert_int_equal(ckjit__disk_default_dir("/explicit/dir", out, sizeof out), 0);
  assert_string_equal(out, "/explicit/dir");
}

/* The library's initialization warns with that reason and goes on without
 * a disk cache; a successful ckjit_init leaves no error behind. */
static void test_init_with_long_cache_dir(void **state) {
  (void)state;
  char *p = long_path(5000);
  setenv("CKJIT_CACHE_DIR", p, 1);
  free(p);
  setenv("CKJIT_ARCH", "sm_90", 1);
  setenv("CKJIT_LOG", "off", 1);
  ckjit_options o;
  ckjit_options_init(&o);
  assert_int_equal(ckjit_init(&o), CKJIT_SUCCESS);
  ckjit_device_info info;
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, "");
  ckjit_shutdown();
  unsetenv("CKJIT_CACHE_DIR");
  unsetenv("CKJIT_ARCH");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_accepts_the_grammar),
      cmocka_unit_test(test_size_refuses_everything_else),
      cmocka_unit_test(test_size_reasons),
      cmocka_unit_test(test_count),
      cmocka_unit_test(test_env_limits),
      cmocka_unit_test(test_default_dir_reasons),
      cmocka_unit_test(test_init_with_long_cache_dir),
  };
  return cmocka_run_group_tests_name("settings", tests, NULL, NULL);
}
