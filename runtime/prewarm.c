/* Ahead-of-time compilation and access to kernels by spec text. */
#include "../base/buffer.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "build.h"
#include "dispatch.h"
#include "../base/error.h"
#include "spec.h"
#include "../base/clock.h"
#include "../base/stats.h"

/* The i-th default spec across all families, in family order. */
static int default_spec_at(size_t index, ckjit_spec *out) {
  for (uint32_t f = 0; f < CKJIT_FAMILY_COUNT_; f++) {
    const ckjit_family *fam = ckjit__family_get(f);
    size_t n = 0;
    ckjit_spec s;
    while (fam->default_spec(n, &s)) n++;
    if (index < n) return fam->default_spec(index, out);
    index -= n;
  }
  return 0;
}

size_t ckjit_default_spec_count(void) {
  size_t n = 0;
  ckjit_spec s;
  while (default_spec_at(n, &s)) n++;
  return n;
}

ckjit_status ckjit_default_spec(size_t index, char *buf, size_t len) {
  if (!buf || !len) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_default_spec: no buffer");
  ckjit_spec s;
  if (!default_spec_at(index, &s))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_default_spec: index %zu past the %zu "
                       "default specs", index, ckjit_default_spec_count());
  return ckjit__spec_format(&s, buf, len);
}

/* Single flight for compile-only requests: threads asking for the same
 * (spec, arch) at once share one build and its result.  Entries live only
 * while a build runs; later requests go through the disk cache again (then
 * the code objects in memory, runtime/code_cache.h), so a prewarm leaves
 * the entry on disk or fails with CKJIT_ERROR_CACHE. */
typedef struct inflight {
  ckjit_spec spec;
  char arch[CKJIT_ARCH_MAX];
  int done, refs;
  ckjit_status status;
  char *error;
  ckjit_compile_result result;
  struct inflight *next;
} inflight;

static pthread_mutex_t inflight_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t inflight_cond = PTHREAD_COND_INITIALIZER;
static inflight *inflight_list;

static ckjit_status build_for(ckjit_runtime *rt, const ckjit_spec *spec, const char *arch,
                              ckjit_compile_result *result) {
  ckjit_build_result built;
  ckjit_status st = ckjit__build(rt, spec, arch, &built);
  if (st) return st;
  result->cached = built.from_disk || built.from_memory || built.from_remote;
  result->stored = built.stored;
  result->code_size = built.code.size;
  ckjit__key_hex(&built.key, result->key);
  ckjit__copy_str(result->kernel, sizeof result->kernel, ckjit__family_get(spec->family)->kernel);
  ckjit__buf_free(&built.code);
  /* This call's purpose is the disk entry: one that is missing fails it
   * (prewarm must not report success on a full disk). */
  if (rt->disk_requested && !built.stored) {
    char spec_text[CKJIT_SPEC_TEXT_MAX];
    ckjit__spec_format(spec, spec_text, sizeof spec_text);
    return ckjit__fail(CKJIT_ERROR_CACHE,
                       "not stored in the disk cache: %s\n(%s for %s, key %s: %s and kept in "
                       "memory for this process)",
                       built.store_error[0] ? built.store_error : "unknown reason", spec_text, arch,
                       result->key, result->cached ? "compiled before" : "compiled");
  }
  return CKJIT_SUCCESS;
}

static void release(inflight *f) {
  if (--f->refs) return;
  free(f->error);
  free(f);
}

/* `*arch`, or when it is NULL the configured arch ("" stays: it is a
 * malformed name, not "the default"). */
static ckjit_status arch_or_configured(const char *api, ckjit_runtime *rt, const char **arch) {
  if (*arch) return CKJIT_SUCCESS;
  if (!*rt->arch)
    return ckjit__fail(CKJIT_ERROR_NO_DEVICE, "%s: no arch given, no GPU present and CKJIT_ARCH unset", api);
  *arch = rt->arch;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_compile_spec(const char *spec_text, const char *arch,
                                ckjit_compile_result *result) {
  double t0 = ckjit__now_ms();
  ckjit_compile_result local;
  if (!result) result = &local;
  memset(result, 0, sizeof *result);
  ckjit_spec spec;
  ckjit_status st = ckjit__spec_parse(spec_text, &spec);
  if (st) return st;
  ckjit_runtime *rt;
  if ((st = ckjit__runtime_get(&rt)) || (st = arch_or_configured("ckjit_compile_spec", rt, &arch))) return st;
  if (strlen(arch) >= CKJIT_ARCH_MAX) return ckjit__arch_validate(arch, 0, 0);
  char canonical_arch[CKJIT_ARCH_MAX]; /* both spellings of a target share one build */
  arch = ckjit__arch_canonical(arch, canonical_arch);

  pthread_mutex_lock(&inflight_lock);
  inflight *f = inflight_list;
  while (f && !(ckjit__spec_equal(&f->spec, &spec) && !strcmp(f->arch, arch))) f = f->next;
  if (f) {
    /* Someone is building it: wait and share the result. */
    f->refs++;
    while (!f->done) pthread_cond_wait(&inflight_cond, &inflight_lock);
    st = f->status;
    if (st == CKJIT_SUCCESS || st == CKJIT_ERROR_CACHE) {
      *result = f->result; /* built either way; CKJIT_ERROR_CACHE: not on disk */
      result->cached = 1;  /* nothing was compiled for this call */
    }
    if (st != CKJIT_SUCCESS) {
      ckjit__fail(st, "%s", f->error ? f->error : "build failed");
    }
    release(f);
    pthread_mutex_unlock(&inflight_lock);
    result->ms = ckjit__now_ms() - t0;
    return st;
  }
  f = calloc(1, sizeof *f);
  if (!f) {
    pthread_mutex_unlock(&inflight_lock);
    return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "ckjit_compile_spec: out of memory");
  }
  f->spec = spec;
  ckjit__copy_str(f->arch, sizeof f->arch, arch);
  f->refs = 1;
  f->next = inflight_list;
  inflight_list = f;
  pthread_mutex_unlock(&inflight_lock);

  st = build_for(rt, &spec, arch, result);

  pthread_mutex_lock(&inflight_lock);
  for (inflight **p = &inflight_list; *p; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      break;
    }
  f->status = st;
  f->result = *result;
  if (st) f->error = strdup(ckjit__error_latest());
  f->done = 1;
  pthread_cond_broadcast(&inflight_cond);
  release(f);
  pthread_mutex_unlock(&inflight_lock);
  result->ms = ckjit__now_ms() - t0;
  return st;
}

ckjit_status ckjit_spec_has_kernel(const char *spec_text, const char *arch) {
  ckjit_spec spec;
  ckjit_status st = ckjit__spec_parse(spec_text, &spec);
  if (st) return st;
  ckjit_runtime *rt;
  if (!arch && ((st = ckjit__runtime_get(&rt)) ||
                (st = arch_or_configured("ckjit_spec_has_kernel", rt, &arch))))
    return st;
  if (ckjit__arch_vendor(arch) == CKJIT_BACKEND_AUTO) return ckjit__arch_validate(arch, 0, 0);
  return ckjit__spec_targets(&spec, arch);
}

ckjit_status ckjit_get_function(const char *spec_text, void **function) {
  if (!function) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_get_function: function is NULL");
  ckjit_spec spec;
  ckjit_status st = ckjit__spec_parse(spec_text, &spec);
  if (st) return st;
  ckjit_gpu *gpu;
  ckjit_kernel *k;
  if ((st = ckjit__current_gpu(&gpu)) || (st = ckjit__kernel_get(gpu, &spec, &k))) return st;
  *function = k->function;
  return CKJIT_SUCCESS;
}
