/* Real compiles, with no GPU: every default spec with NVRTC for sm_90 and
 * with hipRTC for gfx90a, through the public ckjit_compile_spec into a fresh
 * cache directory (the other vendor's GEMMs refused, not compiled); cache
 * hits on the second round; the paged attention and paged_append specs of
 * the default set present and compiled; refused targets that would crash
 * hipRTC; CKJIT_DUMP_DIR output. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckjit/ckjit.h"
#include "portable_specs.h"
#include "test_util.h"

static char *g_base;
static char g_cache[1024], g_dump[1024];
static size_t g_n;
static char (*g_cuda_keys)[33];
static char (*g_hip_keys)[33];
static char (*g_kernels)[64]; /* kernel name of each default spec */
static int g_hip_available = -1; /* -1 unknown, 0 no, 1 yes */
static int g_compiled[2];        /* compile_all went through: CUDA, HIP */

static int group_setup(void **state) {
  (void)state;
  g_base = tu_mkdtemp("compile");
  if (!g_base) return -1;
  snprintf(g_cache, sizeof g_cache, "%s/cache", g_base);
  snprintf(g_dump, sizeof g_dump, "%s/dump", g_base);
  /* Before the first ckjit call: the runtime reads these once. */
  setenv("CKJIT_CACHE_DIR", g_cache, 1);
  setenv("CKJIT_DUMP_DIR", g_dump, 1);
  unsetenv("CKJIT_CACHE_DISABLE");
  unsetenv("CKJIT_ARCH");
  g_n = ckjit_default_spec_count();
  g_cuda_keys = calloc(g_n, sizeof *g_cuda_keys);
  g_hip_keys = calloc(g_n, sizeof *g_hip_keys);
  g_kernels = calloc(g_n, sizeof *g_kernels);
  return g_n && g_cuda_keys && g_hip_keys && g_kernels ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  ckjit_shutdown();
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_base);
  free(g_base);
  free(g_cuda_keys);
  free(g_hip_keys);
  free(g_kernels);
  return 0;
}

static void spec_text(size_t i, char *buf, size_t len) {
  assert_int_equal(ckjit_default_spec(i, buf, len), CKJIT_SUCCESS);
}

static int is_hex32(const char *s) {
  if (strlen(s) != 32) return 0;
  for (int i = 0; i < 32; i++)
    if (!isxdigit((unsigned char)s[i])) return 0;
  return 1;
}

/* Reads the payload of the cache entry of `hex` (documented layout: header
 * size at offset 12, payload after the header). */
static uint8_t *read_entry_payload(const char *hex, size_t *payload_size) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%.2s/%s.ckjit", g_cache, hex, hex);
  size_t size = 0;
  uint8_t *file = tu_read_file(path, &size);
  if (!file) {
    print_error("no cache entry file %s\n", path);
    return NULL;
  }
  if (size < 64 || memcmp(file, "CKJITBIN", 8) != 0) {
    free(file);
    print_error("%s is not a ckjit entry\n", path);
    return NULL;
  }
  uint32_t h = (uint32_t)file[12] | (uint32_t)file[13] << 8 | (uint32_t)file[14] << 16 |
               (uint32_t)file[15] << 24;
  if (h > size) {
    free(file);
    return NULL;
  }
  *payload_size = size - h;
  memmove(file, file + h, size - h);
  return file;
}

/* ---- refused targets ------------------------------------------------------ */

/* In a child process, so a compiler that aborts cannot take the test
 * program down: compile for `arch` must return UNSUPPORTED.  Exit codes:
 * 0 refused as wanted, 77 no hipRTC, 1 anything else. */
static int refused_in_child(const char *arch) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char spec[256];
    if (ckjit_default_spec(0, spec, sizeof spec) != CKJIT_SUCCESS) _exit(1);
    ckjit_compile_result r;
    ckjit_status st = ckjit_compile_spec(spec, arch, &r);
    if (st == CKJIT_ERROR_UNSUPPORTED && ckjit_last_error()[0]) _exit(0);
    if (st == CKJIT_ERROR_BACKEND_UNAVAILABLE) _exit(77);
    fprintf(stderr, "compile for %s: %s (%s)\n", arch, ckjit_status_string(st), ckjit_last_error());
    _exit(1);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 0;
  if (WIFSIGNALED(status)) {
    print_error("compile for \"%s\" killed the process with signal %d (the compiler aborted: the "
                "arch must be refused before compiling)\n",
                arch, WTERMSIG(status));
    return 0;
  }
  if (!WIFEXITED(status)) return 0;
  if (WEXITSTATUS(status) == 77) {
    printf("note: \"%s\" not checked: hipRTC is not available\n", arch);
    return 1;
  }
  if (WEXITSTATUS(status) != 0) print_error("compile for \"%s\" was not refused\n", arch);
  return WEXITSTATUS(status) == 0;
}

static void test_crashing_targets_refused_in_child(void **state) {
  (void)state;
  const char *archs[] = {"gfx942", "gfx1100", "gfx940", "gfx999", "gfx942:sramecc+:xnack-",
                         "gfx1030:xnack-", "gfx900:sramecc+"};
  int bad = 0;
  for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) bad += !refused_in_child(archs[i]);
  assert_int_equal(bad, 0);
}

/* ---- full compile of every default spec ---------------------------------- */

/* Whether a default spec has a kernel for the arch compiled here (the
 * library must refuse the others rather than serve an empty kernel). */
static int has_kernel(const char *spec, int is_hip) {
  return ps_vendor_only(spec) != (is_hip ? PS_NVIDIA_ONLY : PS_AMD_ONLY);
}

static void compile_all(const char *arch, char (*keys)[33], int is_hip) {
  ckjit_reset_stats();
  char spec[256];
  size_t *sizes = calloc(g_n, sizeof *sizes);
  assert_non_null(sizes);
  double t0 = 0;
  size_t n_kernels = 0; /* specs with a kernel for arch */
  for (size_t i = 0; i < g_n; i++) {
    spec_text(i, spec, sizeof spec);
    ckjit_compile_result r;
    memset(&r, 0x55, sizeof r);
    ckjit_status st = ckjit_compile_spec(spec, arch, &r);
    if (i > 0 && !has_kernel(spec, is_hip)) {
      if (st != CKJIT_ERROR_UNSUPPORTED || !strstr(ckjit_last_error(), "has no kernel for"))
        print_error("%s for %s: want CKJIT_ERROR_UNSUPPORTED (no kernel), got %s: %s\n", spec, arch,
                    ckjit_status_string(st), ckjit_last_error());
      assert_int_equal(st, CKJIT_ERROR_UNSUPPORTED);
      keys[i][0] = '\0';
      continue;
    }
    n_kernels++;
    if (i == 0 && st == CKJIT_ERROR_BACKEND_UNAVAILABLE) {
      printf("SKIP %s: %s compiler not available: %s\n", arch, is_hip ? "hipRTC" : "NVRTC",
             ckjit_last_error());
      if (is_hip) g_hip_available = 0;
      free(sizes);
      skip();
    }
    if (st != CKJIT_SUCCESS) print_error("compile %s for %s: %s\n", spec, arch, ckjit_last_error());
    assert_int_equal(st, CKJIT_SUCCESS);
    if (is_hip) g_hip_available = 1;
    assert_int_equal(r.cached, 0);
    assert_true(r.code_size > 0);
    assert_true(r.ms >= 0);
    t0 += r.ms;
    assert_true(is_hex32(r.key));
    assert_true(r.kernel[0] != 0);
    assert_non_null(memchr(r.kernel, 0, sizeof r.kernel));
    memcpy(keys[i], r.key, 33);
    if (g_kernels[i][0]) assert_string_equal(g_kernels[i], r.kernel);
    memcpy(g_kernels[i], r.kernel, sizeof g_kernels[i]);
    sizes[i] = r.code_size;
    /* The stored entry holds the code object: an ELF file of code_size. */
    size_t psize = 0;
    uint8_t *payload = read_entry_payload(r.key, &psize);
    assert_non_null(payload);
    assert_int_equal(psize, r.code_size);
    if (memcmp(payload, "\177ELF", 4) != 0) {
      print_error("code object of %s for %s is not ELF (starts \"%.8s\")\n", spec, arch,
                  (const char *)payload);
      fail();
    }
    free(payload);
  }
  printf("%s: %zu specs compiled in %.0f ms; %zu refused (no kernel for the arch)\n", arch, n_kernels, t0,
         g_n - n_kernels);
  assert_true(n_kernels > 0 && n_kernels < g_n); /* both kinds are in the default set */

  ckjit_stats s;
  ckjit_get_stats(&s);
  assert_int_equal(s.compiles, n_kernels);
  assert_int_equal(s.compile_failures, 0);
  assert_int_equal(s.disk_writes, n_kernels);
  assert_int_equal(s.disk_write_errors, 0);
  assert_int_equal(s.disk_hits, 0);
  assert_int_equal(s.disk_rejects, 0);
  assert_int_equal(s.disk_misses, n_kernels);
  assert_int_equal(s.loads, 0);
  assert_true(s.compile_ms > 0);

  /* Every spec has its own key.  Compared and printed from a local copy:
   * with -O3 -fsanitize=undefined (its nonnull-attribute part), GCC guards
   * strcmp's arguments with a recoverable null check, unswitches the loop
   * on "keys[i] is NULL" (never true: the row was just read) and then warns
   * (-Wformat-overflow) that this dead copy prints NULL with %s, which
   * -Werror turns into a failed build.  A local array cannot be NULL on any
   * path. */
  for (size_t i = 0; i < g_n; i++) {
    char key[33];
    memcpy(key, keys[i], sizeof key);
    if (!key[0]) continue; /* no kernel for the arch */
    for (size_t j = i + 1; j < g_n; j++)
      if (!strcmp(key, keys[j])) {
        print_error("specs %zu and %zu share key %s\n", i, j, key);
        fail();
      }
  }

  /* Second round: all from the disk cache, same keys and sizes. */
  ckjit_reset_stats();
  ckjit_get_stats(&s);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 0);
  for (size_t i = 0; i < g_n; i++) {
    spec_text(i, spec, sizeof spec);
    ckjit_compile_result r;
    if (!keys[i][0]) {
      assert_int_equal(ckjit_compile_spec(spec, arch, &r), CKJIT_ERROR_UNSUPPORTED);
      continue;
    }
    assert_int_equal(ckjit_compile_spec(spec, arch, &r), CKJIT_SUCCESS);
    assert_int_equal(r.cached, 1);
    assert_string_equal(r.key, keys[i]);
    assert_int_equal(r.code_size, sizes[i]);
    assert_string_equal(r.kernel, g_kernels[i]);
  }
  ckjit_get_stats(&s);
  assert_int_equal(s.disk_hits, n_kernels);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_writes, 0);
  assert_int_equal(s.disk_misses, 0);

  /* A fresh runtime finds them on disk too; result may be NULL. */
  ckjit_shutdown();
  spec_text(0, spec, sizeof spec);
  ckjit_compile_result r;
  assert_int_equal(ckjit_compile_spec(spec, arch, &r), CKJIT_SUCCESS);
  assert_int_equal(r.cached, 1);
  assert_string_equal(r.key, keys[0]);
  assert_int_equal(ckjit_compile_spec(spec, arch, NULL), CKJIT_SUCCESS);
  free(sizes);
  g_compiled[is_hip] = 1;
}

static void test_compile_all_cuda(void **state) {
  (void)state;
  compile_all("sm_90", g_cuda_keys, 0);
  /* Another arch string is another key. */
  char spec[256];
  spec_text(0, spec, sizeof spec);
  ckjit_compile_result r;
  ckjit_status st = ckjit_compile_spec(spec, "sm_90a", &r);
  if (st != CKJIT_SUCCESS) print_error("sm_90a: %s\n", ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
  assert_string_not_equal(r.key, g_cuda_keys[0]);
}

static void test_compile_all_hip(void **state) {
  (void)state;
  compile_all("gfx90a", g_hip_keys, 1);
  for (size_t i = 0; i < g_n; i++)
    if (g_cuda_keys[i][0] && g_hip_keys[i][0]) assert_string_not_equal(g_hip_keys[i], g_cuda_keys[i]);
  char spec[256];
  spec_text(0, spec, sizeof spec);
  ckjit_compile_result r;
  ckjit_status st = ckjit_compile_spec(spec, "gfx90a:sramecc+:xnack-", &r);
  if (st != CKJIT_SUCCESS) print_error("gfx90a:sramecc+:xnack-: %s\n", ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
  assert_string_not_equal(r.key, g_hip_keys[0]);
  assert_true(r.code_size > 0);
}

static void test_refused_in_process(void **state) {
  (void)state;
  char spec[256];
  spec_text(0, spec, sizeof spec);
  ckjit_stats before, after;
  ckjit_get_stats(&before);
  const char *archs[] = {"gfx942", "gfx1100"};
  for (size_t i = 0; i < 2; i++) {
    ckjit_compile_result r;
    ckjit_status st = ckjit_compile_spec(spec, archs[i], &r);
    if (st == CKJIT_ERROR_BACKEND_UNAVAILABLE && g_hip_available == 0) {
      printf("note: %s: hipRTC not available\n", archs[i]);
      continue;
    }
    if (st != CKJIT_ERROR_UNSUPPORTED)
      print_error("%s: %s (%s)\n", archs[i], ckjit_status_string(st), ckjit_last_error());
    assert_int_equal(st, CKJIT_ERROR_UNSUPPORTED);
    assert_true(strlen(ckjit_last_error()) > 0);
  }
  /* Malformed arch names. */
  /* ("" may mean "the configured arch", like NULL: only failure is required.) */
  assert_int_not_equal(ckjit_compile_spec(spec, "", NULL), CKJIT_SUCCESS);
  assert_true(strlen(ckjit_last_error()) > 0);
  const char *bad[] = {"sm_9x", "gfx", "x86_64", "GFX90A", "sm_90 ", "gfx90a:bogus"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ckjit_status st = ckjit_compile_spec(spec, bad[i], NULL);
    if (st != CKJIT_ERROR_UNSUPPORTED && st != CKJIT_ERROR_INVALID_ARGUMENT) {
      print_error("arch \"%s\": %s\n", bad[i], ckjit_status_string(st));
      fail();
    }
    assert_true(strlen(ckjit_last_error()) > 0);
  }
  /* Still alive, nothing compiled or written. */
  ckjit_get_stats(&after);
  assert_int_equal(after.compiles, before.compiles);
  assert_int_equal(after.disk_writes, before.disk_writes);
}

/* The paged attention specs of the default (prewarm) set, issue 18: every
 * attention family has specs of pages 1, 16 and 128 (attention_decode 1
 * and 16), and paged_append (a portable family) pages 1, 16 and 128 in f16
 * and bf16; each was compiled
 * above for every arch whose vendor has the family (a paged spec missing
 * from the default set, or one whose PAGE code fails to compile, shows here
 * by name).  Runs after the compile tests: it reads their keys. */
static void test_default_set_paged(void **state) {
  (void)state;
  if (!g_compiled[0] && !g_compiled[1]) {
    printf("SKIP paged default specs: nothing was compiled\n");
    skip();
  }
  static const struct {
    const char *prefix, *dtype; /* dtype NULL: any */
    int decode;                 /* attention_decode's set: pages 1 and 16 only */
  } families[] = {{"attention_wgmma:", NULL, 0}, {"attention_mma:", NULL, 0},      {"attention_mfma:", NULL, 0},
                  {"attention_simt:", NULL, 0},  {"attention_decode:", NULL, 1},   {"paged_append:", "dtype=f16,", 0},
                  {"paged_append:", "dtype=bf16,", 0}};
  static const int pages[] = {1, 16, 128};
  enum { NF = sizeof families / sizeof families[0], NP = sizeof pages / sizeof pages[0] };
  int found[NF][NP];
  memset(found, 0, sizeof found);
  size_t paged = 0;
  char spec[512];
  for (size_t i = 0; i < g_n; i++) {
    spec_text(i, spec, sizeof spec);
    const char *page = strstr(spec, ",page=");
    if (!page || atoi(page + 6) == 0) continue; /* not paged (dense attention: page=0) */
    paged++;
    for (int f = 0; f < NF; f++)
      if (!strncmp(spec, families[f].prefix, strlen(families[f].prefix)) &&
          (!families[f].dtype || strstr(spec, families[f].dtype)))
        for (int k = 0; k < NP; k++) found[f][k] |= atoi(page + 6) == pages[k];
    const int cuda_missing = has_kernel(spec, 0) && g_compiled[0] && !g_cuda_keys[i][0];
    const int hip_missing = has_kernel(spec, 1) && g_compiled[1] && !g_hip_keys[i][0];
    if (cuda_missing || hip_missing) {
      print_error("paged default spec %s was not compiled for %s\n", spec, cuda_missing ? "sm_90" : "gfx90a");
      fail();
    }
  }
  for (int f = 0; f < NF; f++)
    for (int k = 0; k < NP; k++)
      if (!found[f][k] && !(families[f].decode && pages[k] == 128)) {
        print_error("the default set has no %s%s spec with page=%d\n", families[f].prefix,
                    families[f].dtype ? families[f].dtype : "", pages[k]);
        fail();
      }
  printf("%zu paged specs in the default set, compiled for their archs\n", paged);
}

static int contains(const char *path, const char *needle) {
  size_t n;
  char *text = tu_read_file(path, &n);
  if (!text) return 0;
  int found = strstr(text, needle) != NULL;
  free(text);
  return found;
}

/* `option`: one the compiler must have been given (NULL: none checked). */
static void check_dump_of(const char *hex, const char *arch, const char *kernel, const char *option) {
  DIR *d = opendir(g_dump);
  if (!d) {
    print_error("CKJIT_DUMP_DIR %s was not created\n", g_dump);
    fail();
  }
  int files = 0, source = 0, options = 0, log = 0, option_seen = !option;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strstr(e->d_name, hex)) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", g_dump, e->d_name);
    files++;
    if (contains(path, kernel) && contains(path, "__global__")) source = 1;
    if (contains(path, arch) && !contains(path, "__global__")) options = 1;
    if (option && strstr(e->d_name, ".options") && contains(path, option)) option_seen = 1;
    if (strstr(e->d_name, "log")) log = 1;
  }
  closedir(d);
  if (!(files >= 3 && source && options && log))
    print_error("dump of %s: %d files, source %d, options %d, log %d\n", hex, files, source,
                options, log);
  assert_true(files >= 3);
  assert_true(source);
  assert_true(options);
  assert_true(log);
  if (!option_seen) print_error("dump of %s: the options lack %s\n", hex, option);
  assert_true(option_seen);
}

static void test_dump_dir(void **state) {
  (void)state;
  if (!g_cuda_keys[0][0] && !g_hip_keys[0][0]) {
    printf("SKIP dump: nothing was compiled\n");
    skip();
  }
  /* Every compile was dumped; spot-check the first and last spec. */
  const size_t pick[2] = {0, g_n - 1};
  for (int k = 0; k < 2; k++) {
    size_t i = pick[k];
    /* NVRTC 12.9+ must not keep a second copy in the driver's cache (CI has 13). */
    if (g_cuda_keys[i][0]) check_dump_of(g_cuda_keys[i], "sm_90", g_kernels[i], "--no-cache");
    if (g_hip_keys[i][0]) check_dump_of(g_hip_keys[i], "gfx90a", g_kernels[i], NULL);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crashing_targets_refused_in_child),
      cmocka_unit_test(test_compile_all_cuda),
      cmocka_unit_test(test_compile_all_hip),
      cmocka_unit_test(test_default_set_paged),
      cmocka_unit_test(test_refused_in_process),
      cmocka_unit_test(test_dump_dir),
  };
  return cmocka_run_group_tests_name("compile", tests, group_setup, group_teardown);
}
