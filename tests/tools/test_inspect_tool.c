/* ckjit-inspect (its path is argv[1]) and its parts:
 *  - the occupancy model (tools/inspect_occupancy.c) on hand-computed cases;
 *  - the code-object reader (tools/inspect_codeobj.c) on garbage and on
 *    every truncation of a real object: an error, never a crash;
 *  - the tool end to end for sm_90 and gfx90a (each when its compiler is
 *    present): plausible numbers (registers > 0, occupancy > 0, the
 *    transpose tile's shared memory exactly);
 *  - for sm_90, the cubin decoding against ptxas itself: the sources the
 *    tool compiled (CKJIT_DUMP_DIR) are compiled again here with NVRTC and
 *    -Xptxas -v, and its "Used N registers, M bytes smem" and "F bytes stack
 *    frame" must equal what the tool read from the EIATTR records. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/embedded.h"
#include "runtime/library_path.h"
#include "tool_run.h"
#include "tools/inspect_codeobj.h"
#include "tools/inspect_occupancy.h"

static const char *g_tool;
static char *g_work;
static int g_cuda, g_hip;

static int setup(void **state) {
  (void)state;
  g_work = tu_mkdtemp("inspect-tool");
  if (!g_work) return -1;
  setenv("CKJIT_LOG", "error", 1);
  g_cuda = can_compile(g_work, "sm_90");
  g_hip = can_compile(g_work, "gfx90a");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_work);
  free(g_work);
  return 0;
}

static void show(const tool_run *r) {
  printf("# exit %d\n# stdout:\n%s\n# stderr:\n%s\n", r->status, r->out, r->err);
}

/* ---- the occupancy model --------------------------------------------------- */

static inspect_kernel nv_kernel(int regs, int smem) {
  inspect_kernel k;
  memset(&k, 0, sizeof k);
  k.vendor = INSPECT_NVIDIA;
  k.regs = regs;
  k.lds_bytes = smem;
  k.max_threads = -1;
  return k;
}

static inspect_kernel amd_kernel(int vgpr, int sgpr, int lds) {
  inspect_kernel k;
  memset(&k, 0, sizeof k);
  k.vendor = INSPECT_AMD;
  k.vgpr = vgpr;
  k.agpr = 0;
  k.sgpr = sgpr;
  k.lds_bytes = lds;
  k.wavefront = 64;
  k.max_threads = -1;
  return k;
}

static void test_occupancy_nvidia(void **state) {
  (void)state;
  occupancy o;
  inspect_kernel k = nv_kernel(32, 0);
  /* 32 regs, 256 threads: warps limit, 8 blocks x 8 warps = 64 = 100%. */
  assert_int_equal(occupancy_compute("sm_90", &k, 256, &o), 0);
  assert_true(o.known);
  assert_int_equal(o.units_per_block, 8);
  assert_int_equal(o.blocks, 8);
  assert_int_equal(o.units, 64);
  assert_true(o.fraction == 1.0);
  assert_string_equal(o.limiter, "warps");
  /* 64 regs, 1024 threads: 2048 regs per warp, 8 warps per sub-partition:
   * one block of 32 warps = 50%. */
  k = nv_kernel(64, 0);
  occupancy_compute("sm_90a", &k, 1024, &o);
  assert_int_equal(o.blocks, 1);
  assert_int_equal(o.units, 32);
  assert_string_equal(o.limiter, "registers");
  /* 255 regs (8192 per warp): 2 warps per sub-partition, one 8-warp block. */
  k = nv_kernel(255, 0);
  occupancy_compute("sm_90", &k, 256, &o);
  assert_int_equal(o.blocks, 1);
  assert_int_equal(o.units, 8);
  assert_true(o.fraction == 8.0 / 64.0);
  /* 100 KB static shared memory + 1 KB reserve: 2 blocks of 228 KB. */
  k = nv_kernel(16, 100 * 1024);
  occupancy_compute("sm_90", &k, 128, &o);
  assert_int_equal(o.by_smem, 2);
  assert_int_equal(o.blocks, 2);
  assert_string_equal(o.limiter, "shared memory");
  /* 32-thread blocks: the 32-blocks limit. */
  k = nv_kernel(16, 0);
  occupancy_compute("sm_90", &k, 32, &o);
  assert_int_equal(o.blocks, 32);
  assert_int_equal(o.units, 32);
  assert_string_equal(o.limiter, "blocks");
  /* Too much shared memory for a block: cannot launch. */
  k = nv_kernel(16, 240 * 1024);
  occupancy_compute("sm_90", &k, 128, &o);
  assert_int_equal(o.blocks, 0);
  assert_true(strlen(o.note) > 0);
  /* An unknown arch, an unknown count. */
  k = nv_kernel(32, 0);
  assert_int_equal(occupancy_compute("sm_61", &k, 256, &o), -1);
  assert_false(o.known);
  assert_non_null(strstr(o.note, "sm_61"));
  k = nv_kernel(-1, 0);
  assert_int_equal(occupancy_compute("sm_90", &k, 256, &o), -1);
}

static void test_occupancy_amd(void **state) {
  (void)state;
  occupancy o;
  /* 19 VGPRs (24 allocated): 8 waves per SIMD; 256 threads = 4 waves:
   * 8 work-groups, 32 waves = 100%. */
  inspect_kernel k = amd_kernel(19, 64, 0);
  assert_int_equal(occupancy_compute("gfx90a", &k, 256, &o), 0);
  assert_int_equal(o.units_per_block, 4);
  assert_int_equal(o.blocks, 8);
  assert_int_equal(o.units, 32);
  assert_true(o.waves_per_simd == 8.0);
  /* The transpose tile: 16640 B of LDS (16896 allocated): 3 per CU. */
  k = amd_kernel(19, 64, 16640);
  occupancy_compute("gfx90a:sramecc+:xnack-", &k, 256, &o);
  assert_int_equal(o.by_smem, 3);
  assert_int_equal(o.blocks, 3);
  assert_int_equal(o.units, 12);
  assert_string_equal(o.limiter, "LDS");
  /* 128 VGPRs: 4 waves per SIMD. */
  k = amd_kernel(128, 32, 0);
  occupancy_compute("gfx90a", &k, 256, &o);
  assert_int_equal(o.by_regs, 4);
  assert_int_equal(o.units, 16);
  assert_true(o.fraction == 0.5);
  assert_string_equal(o.limiter, "VGPRs");
  /* 512 VGPRs (AGPRs included): 1 wave per SIMD. */
  k = amd_kernel(512, 32, 0);
  occupancy_compute("gfx90a", &k, 64, &o);
  assert_int_equal(o.units, 4);
  /* 1024 threads = 16 waves; 2 WGs by waves. */
  k = amd_kernel(16, 32, 0);
  occupancy_compute("gfx942", &k, 1024, &o);
  assert_int_equal(o.blocks, 2);
  assert_int_equal(o.units, 32);
  assert_int_equal(occupancy_compute("gfx1030", &k, 256, &o), -1);
  assert_false(o.known);
  /* The vendor must match the arch. */
  k = nv_kernel(32, 0);
  assert_int_equal(occupancy_compute("gfx90a", &k, 256, &o), -1);
}

/* ---- the reader on bad input ------------------------------------------------ */

static void test_reader_rejects_garbage(void **state) {
  (void)state;
  inspect_object obj;
  char err[256];
  unsigned char buf[512];
  tu_rng rng = {7};
  for (int round = 0; round < 200; round++) {
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)tu_rng_next(&rng);
    if (round % 2) memcpy(buf, "\177ELF\2\1\1", 7); /* an ELF header of noise */
    if (round % 4 == 3) memcpy(buf, "__CLANG_OFFLOAD_BUNDLE__", 24);
    size_t n = (size_t)tu_rng_range(&rng, 0, sizeof buf);
    if (inspect_code_object(buf, n, &obj, err, sizeof err) == 0) inspect_object_free(&obj);
  }
  assert_int_equal(inspect_code_object("", 0, &obj, err, sizeof err), -1);
  assert_true(strlen(err) > 0);
  assert_int_equal(inspect_code_object("CCOB....", 8, &obj, err, sizeof err), -1);
}

/* Every truncation (and a few corruptions) of a real code object. */
static void torture(const uint8_t *code, size_t size) {
  inspect_object obj;
  char err[256];
  uint8_t *copy = malloc(size);
  assert_non_null(copy);
  for (size_t n = 0; n < size; n += n < 256 ? 1 : 61) {
    memcpy(copy, code, n);
    if (inspect_code_object(copy, n, &obj, err, sizeof err) == 0) inspect_object_free(&obj);
  }
  tu_rng rng = {size};
  for (int i = 0; i < 300; i++) {
    memcpy(copy, code, size);
    for (int j = 0; j < 4; j++) copy[tu_rng_next(&rng) % size] ^= (uint8_t)(1u << (i % 8));
    if (inspect_code_object(copy, size, &obj, err, sizeof err) == 0) inspect_object_free(&obj);
  }
  free(copy);
}

/* ---- the tool end to end ------------------------------------------------------- */

static tool_run inspect(const char *arch, const char *const *specs, const char *dump) {
  char cache[1024], dump_env[1100];
  tu_fmt(cache, sizeof cache, "%s/cache", g_work);
  const char *argv[16] = {g_tool, "--cache-dir", cache, "--arch", arch, "--json"};
  int n = 6;
  for (int i = 0; specs[i]; i++) argv[n++] = specs[i];
  argv[n] = NULL;
  const char *env[2] = {NULL, NULL};
  if (dump) {
    tu_fmt(dump_env, sizeof dump_env, "CKJIT_DUMP_DIR=%s", dump);
    env[0] = dump_env;
  }
  return run_tool(g_work, argv, env);
}

/* The code object of the cache entry `key` (for the reader's torture). */
static uint8_t *entry_payload(const char *key, size_t *size) {
  char path[1200];
  tu_fmt(path, sizeof path, "%s/cache/%.2s/%s.ckjit", g_work, key, key);
  size_t n;
  uint8_t *file = tu_read_file(path, &n);
  if (!file || n < 16) return NULL;
  uint32_t header = (uint32_t)file[12] | (uint32_t)file[13] << 8 | (uint32_t)file[14] << 16 |
                    (uint32_t)file[15] << 24;
  if (header >= n) return NULL;
  *size = n - header;
  uint8_t *p = malloc(*size);
  memcpy(p, file + header, *size);
  free(file);
  return p;
}

static void check_common(const tool_run *r) {
  if (r->status != 0) show(r);
  assert_int_equal(r->status, 0);
  assert_int_equal(count_of(r->out, "\"result\": \"ok\""), 2);
  assert_true(json_num_after(r->out, NULL, "occupancy") > 0);
  assert_true(json_num_after(r->out, "elementwise", "occupancy") > 0);
  assert_non_null(strstr(r->out, "\"known\": true"));
}

static void test_inspect_gfx90a(void **state) {
  (void)state;
  if (!g_hip) {
    printf("# SKIP: no hipRTC here\n");
    skip();
  }
  const char *specs[] = {"transpose:dtype=f32", "elementwise:dtype=f32,op=gelu_tanh", NULL};
  tool_run r = inspect("gfx90a", specs, NULL);
  check_common(&r);
  for (int i = 0; i < 2; i++) {
    const char *at = i ? "elementwise" : "\"spec\": \"transpose";
    assert_true(json_num_after(r.out, at, "vgpr_count") > 0);
    assert_true(json_num_after(r.out, at, "sgpr_count") > 0);
    assert_true(json_num_after(r.out, at, "agpr_count") >= 0);
    assert_int_equal((int)json_num_after(r.out, at, "wavefront_size"), 64);
    assert_int_equal((int)json_num_after(r.out, at, "max_threads"), 256);
    assert_int_equal((int)json_num_after(r.out, at, "vgpr_spill_count"), 0);
  }
  /* 64 x 65 floats of tile. */
  assert_int_equal((int)json_num_after(r.out, "\"spec\": \"transpose", "lds_bytes"), 64 * 65 * 4);
  assert_int_equal((int)json_num_after(r.out, "elementwise", "lds_bytes"), 0);
  /* The reader survives every truncation of this object. */
  char *keys = json_strings_sorted(r.out, "key");
  char key[33];
  memcpy(key, keys, 32);
  key[32] = '\0';
  size_t size;
  uint8_t *code = entry_payload(key, &size);
  assert_non_null(code);
  torture(code, size);
  free(code);
  free(keys);
  tool_run_free(&r);
}

/* ---- ptxas as the reference ------------------------------------------------------ */

typedef int (*nvrtc_create_t)(void **, const char *, const char *, int, const char *const *,
                              const char *const *);
typedef int (*nvrtc_compile_t)(void *, int, const char *const *);
typedef int (*nvrtc_size_t)(void *, size_t *);
typedef int (*nvrtc_get_t)(void *, char *);
typedef int (*nvrtc_destroy_t)(void **);

/* Compiles `source` with `options` + -Xptxas -v; returns the log or NULL,
 * and the cubin in *cubin (malloc'ed) when cubin is not NULL. */
static char *ptxas_log_cubin(const char *source, char options[][128], int n_opts, uint8_t **cubin,
                             size_t *cubin_size) {
  static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                      "libnvrtc.so.11.2", NULL};
  static const char *const dirs[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/opt/cuda/lib64",
                                     NULL};
  char path[1024];
  if (ckjit__find_library(names, dirs, "CKJIT_NVRTC_LIBRARY", path, sizeof path)) return NULL;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return NULL;
  nvrtc_create_t create = (nvrtc_create_t)dlsym(h, "nvrtcCreateProgram");
  nvrtc_compile_t compile = (nvrtc_compile_t)dlsym(h, "nvrtcCompileProgram");
  nvrtc_size_t log_size = (nvrtc_size_t)dlsym(h, "nvrtcGetProgramLogSize");
  nvrtc_get_t get_log = (nvrtc_get_t)dlsym(h, "nvrtcGetProgramLog");
  nvrtc_destroy_t destroy = (nvrtc_destroy_t)dlsym(h, "nvrtcDestroyProgram");
  nvrtc_size_t cubin_size_fn = (nvrtc_size_t)dlsym(h, "nvrtcGetCUBINSize");
  nvrtc_get_t get_cubin = (nvrtc_get_t)dlsym(h, "nvrtcGetCUBIN");
  if (!create || !compile || !log_size || !get_log || !destroy || !cubin_size_fn || !get_cubin)
    return NULL;
  const char *const *hdr_names, *const *hdr_sources;
  int n_hdrs = ckjit__embedded_headers(&hdr_names, &hdr_sources);
  void *prog = NULL;
  if (create(&prog, source, "kernel.cu", n_hdrs, hdr_sources, hdr_names)) return NULL;
  const char *opts[20];
  int n = 0;
  for (int i = 0; i < n_opts && n < 17; i++) opts[n++] = options[i];
  opts[n++] = "-Xptxas";
  opts[n++] = "-v";
  int rc = compile(prog, n, opts);
  size_t size = 0;
  char *log = NULL;
  if (!log_size(prog, &size) && (log = calloc(size + 1, 1))) get_log(prog, log);
  if (!rc && cubin && !cubin_size_fn(prog, cubin_size) && (*cubin = malloc(*cubin_size)))
    get_cubin(prog, (char *)*cubin);
  destroy(&prog);
  if (rc) {
    printf("# NVRTC failed on the dumped source:\n%s\n", log ? log : "");
    free(log);
    return NULL;
  }
  return log;
}

static char *ptxas_log(const char *source, char options[][128], int n_opts) {
  return ptxas_log_cubin(source, options, n_opts, NULL, NULL);
}

static long after_number(const char *log, const char *suffix) {
  /* "... 32 registers" / "16640 bytes smem": the number before `suffix`. */
  const char *p = strstr(log, suffix);
  if (!p) return -1;
  while (p > log && p[-1] == ' ') p--;
  const char *e = p;
  while (p > log && p[-1] >= '0' && p[-1] <= '9') p--;
  return p == e ? -1 : strtol(p, NULL, 10);
}

static void test_inspect_sm90_against_ptxas(void **state) {
  (void)state;
  if (!g_cuda) {
    printf("# SKIP: no NVRTC here\n");
    skip();
  }
  char dump[1024];
  tu_fmt(dump, sizeof dump, "%s/dump", g_work);
  const char *specs[] = {"transpose:dtype=f32", "elementwise:dtype=f32,op=gelu_tanh",
                         "transpose:dtype=bf16,tile=32,vec=1", NULL};
  tool_run r = inspect("sm_90", specs, dump);
  if (r.status != 0) show(&r);
  assert_int_equal(r.status, 0);
  assert_int_equal(count_of(r.out, "\"result\": \"ok\""), 3);
  assert_true(json_num_after(r.out, NULL, "registers") > 0);
  assert_true(json_num_after(r.out, NULL, "occupancy") > 0);
  assert_int_equal((int)json_num_after(r.out, "\"spec\": \"transpose:dtype=f32", "shared_bytes"),
                   64 * 65 * 4);
  assert_int_equal((int)json_num_after(r.out, "elementwise", "shared_bytes"), 0);
  assert_int_equal((int)json_num_after(r.out, NULL, "max_threads"), 256);

  /* Each compiled source, again through ptxas -v. */
  DIR *d = opendir(dump);
  assert_non_null(d);
  int checked = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len < 36 || strcmp(de->d_name + len - 3, ".cu")) continue;
    char key[33], base[512], path[1700];
    memcpy(key, de->d_name + len - 35, 32);
    key[32] = '\0';
    tu_fmt(base, sizeof base, "%.*s", (int)(len - 3), de->d_name);
    tu_fmt(path, sizeof path, "%s/%s.cu", dump, base);
    size_t n;
    char *source = tu_read_file(path, &n);
    tu_fmt(path, sizeof path, "%s/%s.options", dump, base);
    char *opt_text = tu_read_file(path, &n);
    assert_non_null(source);
    assert_non_null(opt_text);
    char opts[16][128];
    int n_opts = 0;
    for (char *l = strtok(opt_text, "\n"); l && n_opts < 16; l = strtok(NULL, "\n"))
      tu_fmt(opts[n_opts++], sizeof opts[0], "%s", l);
    char *log = ptxas_log(source, opts, n_opts);
    if (!log) {
      printf("# could not run NVRTC -Xptxas -v here; the decoding is not cross-checked\n");
      free(source);
      free(opt_text);
      continue;
    }
    long regs = after_number(log, " registers");
    long smem = after_number(log, " bytes smem");
    long frame = after_number(log, " bytes stack frame");
    char at[64];
    tu_fmt(at, sizeof at, "\"key\": \"%s\"", key);
    assert_non_null(strstr(r.out, at));
    long t_regs = (long)json_num_after(r.out, at, "registers");
    long t_smem = (long)json_num_after(r.out, at, "shared_bytes");
    long t_frame = (long)json_num_after(r.out, at, "local_bytes");
    printf("# %s: ptxas regs %ld smem %ld frame %ld; inspect regs %ld smem %ld frame %ld\n", key,
           regs, smem, frame, t_regs, t_smem, t_frame);
    if (regs != t_regs || (smem < 0 ? 0 : smem) != t_smem || frame != t_frame)
      fail_msg("ckjit-inspect disagrees with ptxas for %s:\n%s", key, log);
    checked++;
    free(log);
    free(source);
    free(opt_text);
  }
  closedir(d);
  assert_true(checked == 0 || checked == 3);

  char *keys = json_strings_sorted(r.out, "key");
  char key[33];
  memcpy(key, keys, 32);
  key[32] = '\0';
  size_t size;
  uint8_t *code = entry_payload(key, &size);
  assert_non_null(code);
  torture(code, size);
  free(code);
  free(keys);
  tool_run_free(&r);
}

/* Kernels with a stack frame (a local array, forced spills) and a little
 * shared memory, straight through NVRTC: the reader against ptxas -v. */
static void test_cubin_frames_against_ptxas(void **state) {
  (void)state;
  if (!g_cuda) {
    printf("# SKIP: no NVRTC here\n");
    skip();
  }
  static const char *const sources[] = {
      "extern \"C\" __global__ void k1(float *o) { __shared__ float s[3];\n"
      "  s[threadIdx.x % 3] = o[threadIdx.x]; __syncthreads(); o[threadIdx.x + 1] = s[0]; }\n",
      "extern \"C\" __global__ void __launch_bounds__(1024) k2(float *o, int n, int m) {\n"
      "  float a[64];\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < 64; i++) a[i] = o[i * n + threadIdx.x];\n"
      "  float s = 0;\n"
      "  for (int j = 0; j < m; j++) s += a[(j * 7 + threadIdx.x) & 63];\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < 64; i++) o[i * m + threadIdx.x] = a[i] * s;\n"
      "}\n",
  };
  const char *archs[] = {"sm_90", "sm_80"};
  int checked = 0;
  for (size_t a = 0; a < 2; a++)
    for (size_t i = 0; i < sizeof sources / sizeof *sources; i++) {
      char opts[1][128];
      tu_fmt(opts[0], sizeof opts[0], "--gpu-architecture=%s", archs[a]);
      uint8_t *cubin = NULL;
      size_t size = 0;
      char *log = ptxas_log_cubin(sources[i], opts, 1, &cubin, &size);
      if (!log || !cubin) {
        free(log);
        free(cubin);
        continue;
      }
      inspect_object obj;
      char err[256];
      assert_int_equal(inspect_code_object(cubin, size, &obj, err, sizeof err), 0);
      assert_int_equal(obj.n_kernels, 1);
      const inspect_kernel *k = &obj.kernels[0];
      long regs = after_number(log, " registers");
      long smem = after_number(log, " bytes smem");
      long frame = after_number(log, " bytes stack frame");
      printf("# %s %s: ptxas regs %ld smem %ld frame %ld; reader regs %lld smem %lld "
             "(+%lld reserved) frame %lld\n", archs[a], k->name, regs, smem, frame,
             (long long)k->regs, (long long)k->lds_bytes, (long long)k->reserved_smem,
             (long long)k->local_bytes);
      assert_int_equal(k->regs, regs);
      assert_int_equal(k->lds_bytes, smem < 0 ? 0 : smem);
      assert_int_equal(k->local_bytes, frame);
      assert_int_equal(k->spill_bytes, frame == 0 ? 0 : -1);
      assert_string_equal(obj.target, archs[a]);
      if (i == 1) {
        assert_int_equal(k->max_threads, 1024);
        assert_true(k->local_bytes > 0);
        assert_int_equal(k->min_stack, after_number(log, " bytes cumulative stack size"));
      }
      checked++;
      inspect_object_free(&obj);
      free(cubin);
      free(log);
    }
  if (!checked) printf("# could not run NVRTC -Xptxas -v here\n");
}

static void test_inspect_usage_and_files(void **state) {
  (void)state;
  const char *help[] = {g_tool, "--help", NULL};
  tool_run r = run_tool(g_work, help, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "usage"));
  tool_run_free(&r);
  const char *bad[] = {g_tool, "--nope", NULL};
  r = run_tool(g_work, bad, NULL);
  assert_int_equal(r.status, 2);
  tool_run_free(&r);
  /* A damaged entry file: exit 1 and a reason. */
  char path[1100];
  tu_fmt(path, sizeof path, "%s/garbage.ckjit", g_work);
  assert_int_equal(tu_write_file(path, "CKJITBIN\0\0\0\0\0\0\0\0", 16), 0);
  const char *file[] = {g_tool, path, NULL};
  r = run_tool(g_work, file, NULL);
  assert_int_equal(r.status, 1);
  assert_true(strlen(r.err) > 0);
  tool_run_free(&r);
  /* A bad spec with a good arch: exit 1, named. */
  if (g_cuda || g_hip) {
    const char *specs[] = {"transpose:dtype=f32", "nosuch:x=1", NULL};
    r = inspect(g_cuda ? "sm_90" : "gfx90a", specs, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "nosuch"));
    assert_int_equal(count_of(r.out, "\"result\": \"ok\""), 1);
    tool_run_free(&r);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH-OF-ckjit-inspect\n", argv[0]);
    return 2;
  }
  g_tool = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_occupancy_nvidia),
      cmocka_unit_test(test_occupancy_amd),
      cmocka_unit_test(test_reader_rejects_garbage),
      cmocka_unit_test(test_inspect_gfx90a),
      cmocka_unit_test(test_inspect_sm90_against_ptxas),
      cmocka_unit_test(test_cubin_frames_against_ptxas),
      cmocka_unit_test(test_inspect_usage_and_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
