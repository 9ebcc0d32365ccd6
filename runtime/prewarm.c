/* Ahead-of-time compilation and access to kernels by spec text. */
#include "buffer.h"
#include <stdio.h>
#include <string.h>

#include "build.h"
#include "dispatch.h"
#include "error.h"
#include "spec.h"
#include "stats.h"

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

ckjit_status ckjit_compile_spec(const char *spec_text, const char *arch,
                                ckjit_compile_result *result) {
  double t0 = ckjit__now_ms();
  if (result) memset(result, 0, sizeof *result);
  ckjit_spec spec;
  ckjit_status st = ckjit__spec_parse(spec_text, &spec);
  if (st) return st;
  ckjit_runtime *rt;
  if ((st = ckjit__runtime_get(&rt))) return st;
  if (!arch) arch = rt->arch; /* "" stays: it is a malformed name, not "the default" */
  if (arch == rt->arch && !*arch)
    return ckjit__fail(CKJIT_ERROR_NO_DEVICE, "ckjit_compile_spec: no arch given, no GPU present "
                       "and CKJIT_ARCH unset");
  ckjit_build_result built;
  if ((st = ckjit__build(rt, &spec, arch, &built))) return st;
  if (result) {
    result->cached = built.from_disk;
    result->code_size = built.code.size;
    ckjit__key_hex(&built.key, result->key);
    ckjit__copy_str(result->kernel, sizeof result->kernel, ckjit__family_get(spec.family)->kernel);
    result->ms = ckjit__now_ms() - t0;
  }
  ckjit__buf_free(&built.code);
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_get_function(const char *spec_text, void **function) {
  if (!function) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_get_function: function is NULL");
  ckjit_spec spec;
  ckjit_status st = ckjit__spec_parse(spec_text, &spec);
  if (st) return st;
  ckjit_runtime *rt;
  ckjit_kernel *k;
  if ((st = ckjit__kernel_get(&spec, &rt, &k))) return st;
  *function = k->function;
  return CKJIT_SUCCESS;
}
