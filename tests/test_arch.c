/* Arch names: vendor by syntax, validation per compiler version, base name,
 * code-object compatibility. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "runtime/arch.h"

#define NVRTC_MAJOR 13
#define NVRTC_MINOR 0
#define HIPRTC_MAJOR 5 /* Debian's HIP 5.2.3 */
#define HIPRTC_MINOR 2

static void expect_valid(const char *arch, int major, int minor) {
  ckjit_status st = ckjit__arch_validate(arch, major, minor);
  if (st != CKJIT_SUCCESS)
    print_error("\"%s\" (compiler %d.%d) rejected: %s\n", arch, major, minor, ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
}

static void expect_invalid(const char *arch, int major, int minor, ckjit_status want) {
  ckjit_status st = ckjit__arch_validate(arch, major, minor);
  if (st == CKJIT_SUCCESS) {
    print_error("\"%.80s\" (compiler %d.%d) accepted\n", arch, major, minor);
    fail();
  }
  assert_int_equal(st, want);
  assert_int_equal(ckjit_last_status(), want);
  assert_true(strlen(ckjit_last_error()) > 0);
}

static void test_vendor(void **state) {
  (void)state;
  assert_int_equal(ckjit__arch_vendor("sm_90"), CKJIT_BACKEND_CUDA);
  assert_int_equal(ckjit__arch_vendor("sm_90a"), CKJIT_BACKEND_CUDA);
  assert_int_equal(ckjit__arch_vendor("sm_80"), CKJIT_BACKEND_CUDA);
  assert_int_equal(ckjit__arch_vendor("sm_100a"), CKJIT_BACKEND_CUDA);
  assert_int_equal(ckjit__arch_vendor("gfx90a"), CKJIT_BACKEND_HIP);
  assert_int_equal(ckjit__arch_vendor("gfx908"), CKJIT_BACKEND_HIP);
  assert_int_equal(ckjit__arch_vendor("gfx1030"), CKJIT_BACKEND_HIP);
  assert_int_equal(ckjit__arch_vendor("gfx942"), CKJIT_BACKEND_HIP);
  assert_int_equal(ckjit__arch_vendor("gfx90a:sramecc+:xnack-"), CKJIT_BACKEND_HIP);
  const char *malformed[] = {"", "sm_", "gfx", "x86_64", "GFX90A", "SM_90", "sm90", "cuda", "hip", " sm_90"};
  for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
    if (ckjit__arch_vendor(malformed[i]) != CKJIT_BACKEND_AUTO) {
      print_error("vendor of \"%s\" is not AUTO\n", malformed[i]);
      fail();
    }
  }
}

static void test_validate_accepts(void **state) {
  (void)state;
  const char *cuda[] = {"sm_90", "sm_90a", "sm_80", "sm_86", "sm_89"};
  for (size_t i = 0; i < sizeof cuda / sizeof cuda[0]; i++) {
    expect_valid(cuda[i], NVRTC_MAJOR, NVRTC_MINOR);
    expect_valid(cuda[i], 12, 4);
  }
  const char *hip[] = {"gfx90a", "gfx908", "gfx1030", "gfx90a:sramecc+:xnack-", "gfx90a:xnack+",
                       "gfx90a:sramecc-", "gfx908:sramecc+:xnack-"};
  for (size_t i = 0; i < sizeof hip / sizeof hip[0]; i++) {
    expect_valid(hip[i], HIPRTC_MAJOR, HIPRTC_MINOR);
    expect_valid(hip[i], 6, 2);
  }
}

static void test_validate_rejects_crashing_targets(void **state) {
  (void)state;
  /* hipRTC 5.x aborts the process for these: they must be refused before
   * any compile. */
  /* Seen aborting Debian's hipRTC 5.2.3: targets it does not know, and
   * features the target lacks (gfx1030 has neither xnack nor sramecc,
   * gfx803 no xnack, gfx900 and gfx1010 no sramecc). */
  const char *bad5[] = {"gfx940", "gfx941", "gfx942", "gfx1100", "gfx942:sramecc+:xnack-",
                        "gfx940:xnack-", "gfx1100:", "gfx950", "gfx1101", "gfx1200", "gfx999",
                        "gfx1030:xnack-", "gfx1030:sramecc+", "gfx803:xnack-", "gfx900:sramecc+",
                        "gfx1010:sramecc+"};
  const int minors[] = {0, 2, 7};
  int accepted = 0;
  for (size_t i = 0; i < sizeof bad5 / sizeof bad5[0]; i++)
    for (size_t m = 0; m < sizeof minors / sizeof minors[0]; m++) {
      ckjit_status st = ckjit__arch_validate(bad5[i], 5, minors[m]);
      if (st != CKJIT_ERROR_UNSUPPORTED) {
        print_error("\"%s\" with hipRTC 5.%d: %s (hipRTC 5.2.3 aborts the process on it)\n", bad5[i],
                    minors[m], ckjit_status_string(st));
        accepted++;
      }
    }
  assert_int_equal(accepted, 0);
  /* Newer hipRTC knows them. */
  expect_valid("gfx942", 6, 2);
  expect_valid("gfx942:sramecc+:xnack-", 6, 2);
  expect_valid("gfx1100", 6, 2);
}

static void test_validate_rejects_malformed(void **state) {
  (void)state;
  const char *bad[] = {
      "", "sm_", "sm_9x", "sm_x9", "sm_-90", "sm_90b", "sm_90aa", "sm_ 90", "sm_90 ", " sm_90",
      "sm_90\n", "SM_90", "sm90", "sm_90:xnack-", "gfx", "gfx90a:bogus", "gfx90a:", "gfx90a::xnack-",
      "gfx90a:xnack", "gfx90a:sramecc", "gfx90a:xnack*", "GFX90A", "gfx90A", "gfx_90a", "gfx 90a",
      "gfx90a ", "x86_64", "cuda", "native", "compute_90", "-arch=sm_90", "sm_90;rm -rf /",
      "gfx90a\"", "gfx9z0",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ckjit_status st = ckjit__arch_validate(bad[i], NVRTC_MAJOR, NVRTC_MINOR);
    if (st == CKJIT_SUCCESS) {
      print_error("malformed arch \"%s\" accepted (nvrtc version)\n", bad[i]);
      fail();
    }
    assert_int_equal(st, CKJIT_ERROR_UNSUPPORTED);
    assert_true(strlen(ckjit_last_error()) > 0);
    st = ckjit__arch_validate(bad[i], HIPRTC_MAJOR, HIPRTC_MINOR);
    if (st == CKJIT_SUCCESS) {
      print_error("malformed arch \"%s\" accepted (hiprtc version)\n", bad[i]);
      fail();
    }
    assert_int_equal(st, CKJIT_ERROR_UNSUPPORTED);
    st = ckjit__arch_validate(bad[i], 0, 0);
    assert_int_equal(st, CKJIT_ERROR_UNSUPPORTED);
  }
}

static void test_validate_long_strings(void **state) {
  (void)state;
  const size_t lens[] = {CKJIT_ARCH_MAX - 1, CKJIT_ARCH_MAX, CKJIT_ARCH_MAX + 1, 1000, 100000};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    size_t n = lens[i];
    char *s = malloc(n + 1);
    assert_non_null(s);
    /* "sm_999...9" */
    memcpy(s, "sm_", 3);
    memset(s + 3, '9', n - 3);
    s[n] = 0;
    expect_invalid(s, NVRTC_MAJOR, NVRTC_MINOR, CKJIT_ERROR_UNSUPPORTED);
    /* "gfx90a:xnack-:xnack-:..." */
    memcpy(s, "gfx90a", 6);
    for (size_t k = 6; k < n; k++) s[k] = ":xnack-"[(k - 6) % 7];
    s[n] = 0;
    expect_invalid(s, HIPRTC_MAJOR, HIPRTC_MINOR, CKJIT_ERROR_UNSUPPORTED);
    /* "gfxaaaa..." */
    memset(s + 3, 'a', n - 3);
    expect_invalid(s, HIPRTC_MAJOR, HIPRTC_MINOR, CKJIT_ERROR_UNSUPPORTED);
    assert_int_equal(ckjit__arch_vendor(s) == CKJIT_BACKEND_CUDA, 0);
    free(s);
  }
}

static void test_base(void **state) {
  (void)state;
  char out[CKJIT_ARCH_MAX];
  ckjit__arch_base("gfx90a:sramecc+:xnack-", out, sizeof out);
  assert_string_equal(out, "gfx90a");
  ckjit__arch_base("gfx90a", out, sizeof out);
  assert_string_equal(out, "gfx90a");
  ckjit__arch_base("sm_90a", out, sizeof out);
  assert_string_equal(out, "sm_90");
  ckjit__arch_base("sm_90", out, sizeof out);
  assert_string_equal(out, "sm_90");
  ckjit__arch_base("gfx1030:xnack-", out, sizeof out);
  assert_string_equal(out, "gfx1030");
  /* A short output buffer is never overrun and stays NUL-terminated. */
  char small[8];
  memset(small, 'Z', sizeof small);
  ckjit__arch_base("gfx90a:sramecc+:xnack-", small, 4);
  assert_true(memchr(small, 0, 4) != NULL);
  for (int i = 4; i < 8; i++) assert_int_equal(small[i], 'Z');
}

static void test_compatible(void **state) {
  (void)state;
  assert_true(ckjit__arch_compatible("sm_90", "sm_90"));
  assert_true(ckjit__arch_compatible("sm_90a", "sm_90"));
  assert_false(ckjit__arch_compatible("sm_80", "sm_90"));
  assert_false(ckjit__arch_compatible("sm_90", "sm_80"));
  assert_false(ckjit__arch_compatible("sm_90", "sm_100"));
  assert_true(ckjit__arch_compatible("gfx90a", "gfx90a"));
  assert_true(ckjit__arch_compatible("gfx90a", "gfx90a:sramecc+:xnack-"));
  assert_true(ckjit__arch_compatible("gfx90a:sramecc+:xnack-", "gfx90a:sramecc+:xnack-"));
  assert_false(ckjit__arch_compatible("gfx908", "gfx90a:sramecc+:xnack-"));
  assert_false(ckjit__arch_compatible("gfx90a", "gfx908"));
  assert_false(ckjit__arch_compatible("gfx90a", "sm_90"));
  assert_false(ckjit__arch_compatible("sm_90", "gfx90a"));
  assert_false(ckjit__arch_compatible("", "sm_90"));
  assert_false(ckjit__arch_compatible("sm_90", ""));
  assert_false(ckjit__arch_compatible("bogus", "bogus"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vendor),
      cmocka_unit_test(test_validate_accepts),
      cmocka_unit_test(test_validate_rejects_crashing_targets),
      cmocka_unit_test(test_validate_rejects_malformed),
      cmocka_unit_test(test_validate_long_strings),
      cmocka_unit_test(test_base),
      cmocka_unit_test(test_compatible),
  };
  return cmocka_run_group_tests_name("arch", tests, NULL, NULL);
}
