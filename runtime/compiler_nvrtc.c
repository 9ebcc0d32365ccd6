/* NVIDIA's runtime compiler: NVRTC compiles a specialized source to a cubin.
 * The library is found without loading it (library_path.h) and opened with
 * dlopen on the first real compile, so libckjit needs no CUDA headers. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/log.h"
#include "arch.h"
#include "backend.h"
#include "library_path.h"

/* ---- NVRTC --------------------------------------------------------------- */
typedef struct nvrtc_program *nvrtc_program;
static struct {
  int (*version)(int *, int *);
  int (*create)(nvrtc_program *, const char *, const char *, int, const char *const *,
                const char *const *);
  int (*compile)(nvrtc_program, int, const char *const *);
  int (*log_size)(nvrtc_program, size_t *);
  int (*log)(nvrtc_program, char *);
  int (*cubin_size)(nvrtc_program, size_t *);
  int (*cubin)(nvrtc_program, char *);
  int (*destroy)(nvrtc_program *);
  const char *(*error_string)(int);
  int (*num_supported_archs)(int *); /* optional: NVRTC 11.2+ */
  int (*supported_archs)(int *);
} nvrtc;

static int cuda_options(const ckjit_compiler *c, const char *arch, char opts[][96], int max) {
  if (max < 3) return 0;
  int n = 0;
  /* A cubin for sm_90 runs on 9.0 devices only, so it may as well use the
   * 9.0-only instructions (wgmma, setmaxnreg) that sm_90a unlocks. */
  snprintf(opts[n++], 96, "--gpu-architecture=%s%s", arch, strcmp(arch, "sm_90") ? "" : "a");
  snprintf(opts[n++], 96, "-std=c++17");
  /* NVRTC 12.9+ keeps its results in the CUDA driver's cache (~/.nv/ComputeCache,
   * shared with every CUDA program's PTX JIT) whenever the driver is loaded.
   * ckjit's disk cache is the one source of truth (as AMD_COMGR_CACHE=0 on the
   * AMD side): a second copy there evicts other programs' entries, survives
   * `ckjit-cache clear` and CKJIT_CACHE_DISABLE=1, and made cold-compile
   * timings report cache hits (bench/NOTES.md #70). */
  if (c->major > 12 || (c->major == 12 && c->minor >= 9)) snprintf(opts[n++], 96, "--no-cache");
  return n;
}

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static char nvrtc_path[512];
static char nvrtc_error[512]; /* "" when NVRTC loaded */
/* What the loaded NVRTC says of itself (its file name's version was a guess). */
static int nvrtc_major, nvrtc_minor;
static int nvrtc_archs[128], nvrtc_n_archs; /* compute capabilities x10; 0: not reported */

static void nvrtc_load(void) {
  void *h = dlopen(nvrtc_path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(nvrtc_error, sizeof nvrtc_error, "cannot load NVRTC %.200s: %.200s", nvrtc_path,
             dlerror());
    return;
  }
#define SYM(field, name)                                                                     \
  if (!(*(void **)&nvrtc.field = dlsym(h, name))) {                                          \
    snprintf(nvrtc_error, sizeof nvrtc_error, "NVRTC %.200s lacks %s", nvrtc_path, name);    \
    return;                                                                                  \
  }
  SYM(version, "nvrtcVersion");
  SYM(create, "nvrtcCreateProgram");
  SYM(compile, "nvrtcCompileProgram");
  SYM(log_size, "nvrtcGetProgramLogSize");
  SYM(log, "nvrtcGetProgramLog");
  SYM(cubin_size, "nvrtcGetCUBINSize");
  SYM(cubin, "nvrtcGetCUBIN");
  SYM(destroy, "nvrtcDestroyProgram");
  SYM(error_string, "nvrtcGetErrorString");
#undef SYM
  nvrtc.version(&nvrtc_major, &nvrtc_minor);
  *(void **)&nvrtc.num_supported_archs = dlsym(h, "nvrtcGetNumSupportedArchs");
  *(void **)&nvrtc.supported_archs = dlsym(h, "nvrtcGetSupportedArchs");
  int n = 0;
  if (nvrtc.num_supported_archs && nvrtc.supported_archs && !nvrtc.num_supported_archs(&n) &&
      n > 0 && n <= (int)(sizeof nvrtc_archs / sizeof *nvrtc_archs) &&
      !nvrtc.supported_archs(nvrtc_archs))
    nvrtc_n_archs = n;
}

static ckjit_status nvrtc_compile(const ckjit_compiler *c, const ckjit_compile_input *in,
                                  ckjit_buffer *code, ckjit_buffer *log) {
  (void)c;
  pthread_once(&nvrtc_once, nvrtc_load);
  if (nvrtc_error[0]) return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE, "%s", nvrtc_error);
  /* The arch was only checked for its syntax before the disk lookup (which
   * must not load NVRTC); now that NVRTC is loaded, it says which archs are
   * real: "sm_101" or "sm_90f" are refused here, not by NVRTC's own
   * "invalid value for --gpu-architecture". */
  ckjit_status st = ckjit__arch_check_nvrtc(in->arch, nvrtc_archs, nvrtc_n_archs, nvrtc_major,
                                            nvrtc_minor);
  if (st) return st;
  nvrtc_program prog = NULL;
  int r = nvrtc.create(&prog, in->source, in->source_name, in->n_headers, in->header_sources,
                       in->header_names);
  if (r) return ckjit__fail(CKJIT_ERROR_COMPILE, "nvrtcCreateProgram: %s", nvrtc.error_string(r));
  int cr = nvrtc.compile(prog, in->n_options, in->options);
  size_t n = 0;
  if (!nvrtc.log_size(prog, &n) && n > 1) {
    char *text = malloc(n + 1);
    if (text && !nvrtc.log(prog, text)) {
      text[n] = '\0';
      ckjit__buf_append_str(log, text);
    }
    free(text);
  }
  if (cr) {
    st = ckjit__fail(CKJIT_ERROR_COMPILE, "NVRTC: %s", nvrtc.error_string(cr));
  } else if (nvrtc.cubin_size(prog, &n) || n == 0) {
    st = ckjit__fail(CKJIT_ERROR_COMPILE, "NVRTC produced no cubin");
  } else {
    code->size = 0;
    char *bin = malloc(n);
    if (!bin || nvrtc.cubin(prog, bin) || ckjit__buf_append(code, bin, n))
      st = ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "NVRTC: cannot read the cubin");
    free(bin);
  }
  nvrtc.destroy(&prog);
  return st;
}

ckjit_status ckjit__cuda_compiler_find(ckjit_compiler *out) {
  static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                      "libnvrtc.so.11.2", NULL};
  static const char *const dirs[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/lib",
                                     "/usr/local/cuda/targets/x86_64-linux/lib", NULL};
  memset(out, 0, sizeof *out);
  const char *forced = getenv("CKJIT_NVRTC_LIBRARY");
  if (ckjit__find_library(names, dirs, "CKJIT_NVRTC_LIBRARY", out->path, sizeof out->path)) {
    if (forced && *forced) /* asked for that file: no silent fallback to another NVRTC */
      return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE,
                         "CKJIT_NVRTC_LIBRARY=%s is not a readable file", forced);
    /* Not in the usual places: let the dynamic linker look (ld.so.cache),
     * at the price of loading it now. */
    char name[64];
    void *h = ckjit__library_open_first(names, name, sizeof name);
    Dl_info info;
    char real[PATH_MAX];
    void *sym = h ? dlsym(h, "nvrtcCompileProgram") : NULL;
    if (!sym || !dladdr(sym, &info) || !info.dli_fname || !realpath(info.dli_fname, real))
      return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE,
                         "NVRTC not found (libnvrtc.so{,.13,.12,.11.2} in LD_LIBRARY_PATH, the "
                         "system library directories or /usr/local/cuda/lib64); install CUDA's "
                         "NVRTC or set CKJIT_NVRTC_LIBRARY to its path");
    ckjit__copy_str(out->path, sizeof out->path, real);
  }
  ckjit__copy_str(nvrtc_path, sizeof nvrtc_path, out->path);
  out->vendor = CKJIT_BACKEND_CUDA;
  out->name = "nvrtc";
  ckjit__library_version(out->path, &out->major, &out->minor);
  char identity[200];
  ckjit__library_identity(out->path, identity, sizeof identity);
  snprintf(out->fingerprint, sizeof out->fingerprint, "nvrtc %s", identity);
  out->compile = nvrtc_compile;
  out->options = cuda_options;
  return CKJIT_SUCCESS;
}
