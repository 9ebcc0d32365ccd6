/* Arch names: vendor by syntax, validation per compiler version, base name,
 * code-object compatibility. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/disk_cache.h"
#include "runtime/arch.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"

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

/* ---- issue 15, item 7: NVIDIA archs are judged by the loaded NVRTC ------ */

/* nvrtcGetSupportedArchs of NVRTC 13.0 (CUDA 13.0.88). */
static const int nvrtc13_archs[] = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
#define N13 ((int)(sizeof nvrtc13_archs / sizeof *nvrtc13_archs))

static void expect_nvrtc(const char *arch, const int *ccs, int n, int major, int minor, int ok) {
  ckjit_status st = ckjit__arch_check_nvrtc(arch, ccs, n, major, minor);
  if ((st == CKJIT_SUCCESS) != ok)
    print_error("\"%s\" with NVRTC %d.%d: %s (%s)\n", arch, major, minor, ckjit_status_string(st),
                st ? ckjit_last_error() : "accepted");
  assert_int_equal(st, ok ? CKJIT_SUCCESS : CKJIT_ERROR_UNSUPPORTED);
}

static void test_check_nvrtc_list(void **state) {
  (void)state;
  /* The names, and the ones the fixed table got wrong both ways:
   * sm_101 (renamed sm_110 in CUDA 13) and sm_88 (new in CUDA 13). */
  const char *refused[] = {"sm_101", "sm_101a", "sm_90f", "sm_89a", "sm_80a", "sm_80f", "sm_70",
                           "sm_72", "sm_52", "sm_99", "sm_999", "sm_10", "sm_00"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
    expect_nvrtc(refused[i], nvrtc13_archs, N13, 13, 0, 0);
  const char *accepted[] = {"sm_75", "sm_80", "sm_88", "sm_89", "sm_90", "sm_90a", "sm_100",
                            "sm_100a", "sm_100f", "sm_103f", "sm_110a", "sm_121f"};
  for (size_t i = 0; i < sizeof accepted / sizeof *accepted; i++)
    expect_nvrtc(accepted[i], nvrtc13_archs, N13, 13, 0, 1);
  /* The message names the reason and the whole supported list. */
  assert_int_equal(ckjit__arch_check_nvrtc("sm_101", nvrtc13_archs, N13, 13, 0),
                   CKJIT_ERROR_UNSUPPORTED);
  assert_non_null(strstr(ckjit_last_error(), "sm_101"));
  assert_non_null(strstr(ckjit_last_error(), "NVRTC 13.0"));
  assert_non_null(strstr(ckjit_last_error(), "sm_75, sm_80, sm_86, sm_87, sm_88, sm_89, sm_90, "
                                             "sm_100, sm_103, sm_110, sm_120, sm_121"));
  assert_int_equal(ckjit__arch_check_nvrtc("sm_90f", nvrtc13_archs, N13, 13, 0),
                   CKJIT_ERROR_UNSUPPORTED);
  assert_non_null(strstr(ckjit_last_error(), "'f' suffix exists for sm_100 and newer"));
  /* Versions: 'f' came with 12.9, 'a' with 12.0. */
  const int nvrtc128[] = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120};
  expect_nvrtc("sm_101", nvrtc128, 17, 12, 8, 1);
  expect_nvrtc("sm_100a", nvrtc128, 17, 12, 8, 1);
  expect_nvrtc("sm_100f", nvrtc128, 17, 12, 8, 0);
  expect_nvrtc("sm_100f", nvrtc128, 17, 12, 9, 1);
  expect_nvrtc("sm_90a", nvrtc128, 17, 11, 8, 0);
  /* No list (NVRTC before 11.2): only the naming rules. */
  expect_nvrtc("sm_101", NULL, 0, 11, 1, 1);
  expect_nvrtc("sm_89a", NULL, 0, 11, 1, 0);
  /* Malformed and AMD names go to the syntax check. */
  expect_nvrtc("sm_1000", nvrtc13_archs, N13, 13, 0, 0);
  expect_nvrtc("gfx90a", nvrtc13_archs, N13, 5, 2, 1);
  /* Before the disk lookup only the syntax of an NVIDIA name is checked:
   * which are real targets is NVRTC's answer. */
  expect_valid("sm_101", NVRTC_MAJOR, NVRTC_MINOR);
  expect_valid("sm_88", NVRTC_MAJOR, NVRTC_MINOR);
  expect_valid("sm_90f", 0, 0);
  expect_invalid("sm_1000", NVRTC_MAJOR, NVRTC_MINOR, CKJIT_ERROR_UNSUPPORTED);
  assert_non_null(strstr(ckjit_last_error(), "not an NVIDIA arch name"));
}

/* The rule above against the NVRTC present here: a trial compile of an
 * empty kernel for every compute capability 50..130 with each suffix must
 * succeed exactly when ckjit__arch_check_nvrtc accepts the name.  This is
 * the evidence the suffix rules come from; a future NVRTC that changes them
 * fails here. */
typedef struct nvrtc_program *nvrtc_program;
static void test_check_nvrtc_matches_trial_compiles(void **state) {
  (void)state;
  const ckjit_compiler *c;
  if (ckjit__compiler_get(CKJIT_BACKEND_CUDA, &c) != CKJIT_SUCCESS) {
    print_message("SKIP: no NVRTC here (%s)\n", ckjit_last_error());
    skip();
  }
  void *h = dlopen(c->path, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h);
  int (*version)(int *, int *) = (int (*)(int *, int *))dlsym(h, "nvrtcVersion");
  int (*num)(int *) = (int (*)(int *))dlsym(h, "nvrtcGetNumSupportedArchs");
  int (*list)(int *) = (int (*)(int *))dlsym(h, "nvrtcGetSupportedArchs");
  int (*create)(nvrtc_program *, const char *, const char *, int, const char *const *,
                const char *const *) =
      (int (*)(nvrtc_program *, const char *, const char *, int, const char *const *,
               const char *const *))dlsym(h, "nvrtcCreateProgram");
  int (*compile)(nvrtc_program, int, const char *const *) =
      (int (*)(nvrtc_program, int, const char *const *))dlsym(h, "nvrtcCompileProgram");
  int (*destroy)(nvrtc_program *) = (int (*)(nvrtc_program *))dlsym(h, "nvrtcDestroyProgram");
  assert_true(version && num && list && create && compile && destroy);
  int major = 0, minor = 0, n = 0;
  assert_int_equal(version(&major, &minor), 0);
  assert_int_equal(num(&n), 0);
  assert_true(n > 0 && n <= 64);
  int ccs[64];
  assert_int_equal(list(ccs), 0);
  int disagreements = 0, accepted = 0;
  const char *suffixes[] = {"", "a", "f"};
  for (int cc = 50; cc <= 130; cc++)
    for (int s = 0; s < 3; s++) {
      char arch[16], option[64];
      snprintf(arch, sizeof arch, "sm_%d%s", cc, suffixes[s]);
      snprintf(option, sizeof option, "--gpu-architecture=%s", arch);
      nvrtc_program prog = NULL;
      assert_int_equal(create(&prog, "__global__ void k() {}\n", "k.cu", 0, NULL, NULL), 0);
      const char *opts[] = {option};
      int nvrtc_ok = compile(prog, 1, opts) == 0;
      destroy(&prog);
      int ckjit_ok = ckjit__arch_check_nvrtc(arch, ccs, n, major, minor) == CKJIT_SUCCESS;
      accepted += nvrtc_ok;
      if (nvrtc_ok != ckjit_ok) {
        print_error("%s: NVRTC %d.%d %s it, ckjit %s it\n", arch, major, minor,
                    nvrtc_ok ? "compiles" : "refuses", ckjit_ok ? "accepts" : "refuses");
        disagreements++;
      }
    }
  print_message("NVRTC %d.%d: %d arch names compile, %d supported compute capabilities\n", major,
                minor, accepted, n);
  assert_int_equal(disagreements, 0);
  assert_true(accepted >= n);
}

/* ---- issue 15, item 8: one spelling of an AMD target --------------------- */

static void test_canonical(void **state) {
  (void)state;
  char out[CKJIT_ARCH_MAX];
  const struct { const char *in, *want; } cases[] = {
      {"gfx90a:xnack+:sramecc+", "gfx90a:sramecc+:xnack+"},
      {"gfx90a:sramecc+:xnack+", "gfx90a:sramecc+:xnack+"},
      {"gfx90a:xnack-:sramecc+", "gfx90a:sramecc+:xnack-"},
      {"gfx942:xnack+:sramecc-", "gfx942:sramecc-:xnack+"},
      {"gfx90a:xnack-", "gfx90a:xnack-"},
      {"gfx90a:sramecc+", "gfx90a:sramecc+"},
      {"gfx90a", "gfx90a"},
      {"gfx1030", "gfx1030"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    memset(out, 'Z', sizeof out);
    const char *got = ckjit__arch_canonical(cases[i].in, out);
    assert_string_equal(got, cases[i].want);
    /* Canonical is a fixed point. */
    char again[CKJIT_ARCH_MAX];
    assert_string_equal(ckjit__arch_canonical(got, again), cases[i].want);
  }
  /* One spelling already, or malformed: the name itself comes back. */
  const char *same[] = {"sm_90", "sm_90a", "sm_100f", "gfx90a:xnack+:xnack-", "gfx90a:bogus+",
                        "", "x86_64"};
  for (size_t i = 0; i < sizeof same / sizeof *same; i++)
    assert_ptr_equal(ckjit__arch_canonical(same[i], out), same[i]);
  assert_null(ckjit__arch_canonical(NULL, out));
  /* A feature named twice is refused, in either order. */
  expect_invalid("gfx90a:xnack+:xnack-", HIPRTC_MAJOR, HIPRTC_MINOR, CKJIT_ERROR_UNSUPPORTED);
  expect_invalid("gfx90a:xnack+:sramecc+:xnack+", HIPRTC_MAJOR, HIPRTC_MINOR,
                 CKJIT_ERROR_UNSUPPORTED);
  expect_invalid("gfx90a:sramecc-:sramecc-", HIPRTC_MAJOR, HIPRTC_MINOR, CKJIT_ERROR_UNSUPPORTED);
}

/* ---- end to end through ckjit_compile_spec (one cache per process) ------ */

static char cache_dir[64];

static int setup_runtime(void **state) {
  (void)state;
  snprintf(cache_dir, sizeof cache_dir, "/tmp/ckjit-test-arch-XXXXXX");
  if (!mkdtemp(cache_dir)) return -1;
  unsetenv("CKJIT_ARCH");
  unsetenv("CKJIT_CACHE_PATH");
  unsetenv("CKJIT_RECORD");
  ckjit_options o;
  ckjit_options_init(&o);
  o.cache_dir = cache_dir;
  o.disk_cache = 1;
  o.arch = "gfx90a:xnack-:sramecc+"; /* the configured arch: shown canonical */
  return ckjit_init(&o) == CKJIT_SUCCESS ? 0 : -1;
}

static int teardown_runtime(void **state) {
  (void)state;
  ckjit_shutdown();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int have_compiler(ckjit_backend vendor) {
  const ckjit_compiler *c;
  if (ckjit__compiler_get(vendor, &c) == CKJIT_SUCCESS) return 1;
  print_message("SKIP: no %s compiler here (%s)\n", vendor == CKJIT_BACKEND_CUDA ? "NVRTC" : "hipRTC",
                ckjit_last_error());
  return 0;
}

static void test_compile_spec_nvidia_archs(void **state) {
  (void)state;
  if (!have_compiler(CKJIT_BACKEND_CUDA)) skip();
  const char *spec = "transpose:dtype=f16";
  ckjit_compile_result r;
  const char *refused[] = {"sm_101", "sm_90f", "sm_89a", "sm_70", "sm_1000"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    ckjit_status st = ckjit_compile_spec(spec, refused[i], &r);
    if (st != CKJIT_ERROR_UNSUPPORTED)
      print_error("%s: %s: %s\n", refused[i], ckjit_status_string(st), ckjit_last_error());
    assert_int_equal(st, CKJIT_ERROR_UNSUPPORTED);
    assert_non_null(strstr(ckjit_last_error(), refused[i]));
    /* Well-formed names get the loaded NVRTC's list. */
    if (strcmp(refused[i], "sm_1000"))
      assert_non_null(strstr(ckjit_last_error(), "sm_90, sm_100"));
  }
  const char *compiled[] = {"sm_90", "sm_90a", "sm_80"};
  for (size_t i = 0; i < sizeof compiled / sizeof *compiled; i++) {
    ckjit_status st = ckjit_compile_spec(spec, compiled[i], &r);
    if (st) print_error("%s: %s: %s\n", compiled[i], ckjit_status_string(st), ckjit_last_error());
    assert_int_equal(st, CKJIT_SUCCESS);
    assert_true(r.code_size > 0);
  }
}

static void test_feature_order_one_key(void **state) {
  (void)state;
  ckjit_device_info info;
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.arch, "gfx90a:sramecc+:xnack-"); /* CKJIT_RECORD writes this one */
  if (!have_compiler(CKJIT_BACKEND_HIP)) skip();
  const char *spec = "transpose:dtype=f32,tile=32";
  ckjit_compile_result a, b;
  assert_int_equal(ckjit_compile_spec(spec, "gfx90a:xnack+:sramecc+", &a), CKJIT_SUCCESS);
  assert_int_equal(ckjit_compile_spec(spec, "gfx90a:sramecc+:xnack+", &b), CKJIT_SUCCESS);
  assert_string_equal(a.key, b.key);
  assert_int_equal(a.cached, 0);
  assert_int_equal(b.cached, 1); /* the second spelling found the first one's entry */
  /* The entry records the canonical spelling. */
  ckjit_runtime *rt;
  assert_int_equal(ckjit__runtime_get(&rt), CKJIT_SUCCESS);
  ckjit_key key;
  assert_int_equal(ckjit__key_parse(a.key, &key), 0);
  void *payload = NULL;
  size_t size = 0;
  ckjit_entry_meta meta;
  assert_int_equal(ckjit__disk_load(&rt->disk, &key, &payload, &size, &meta), 1);
  free(payload);
  assert_string_equal(meta.arch, "gfx90a:sramecc+:xnack+");
  /* A feature named twice is refused before any compile. */
  assert_int_equal(ckjit_compile_spec(spec, "gfx90a:xnack+:xnack-", &a), CKJIT_ERROR_UNSUPPORTED);
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
      cmocka_unit_test(test_check_nvrtc_list),
      cmocka_unit_test(test_check_nvrtc_matches_trial_compiles),
      cmocka_unit_test(test_canonical),
  };
  const struct CMUnitTest runtime_tests[] = {
      cmocka_unit_test(test_compile_spec_nvidia_archs),
      cmocka_unit_test(test_feature_order_one_key),
  };
  int failed = cmocka_run_group_tests_name("arch", tests, NULL, NULL);
  return failed + cmocka_run_group_tests_name("arch_compile", runtime_tests, setup_runtime,
                                              teardown_runtime);
}
