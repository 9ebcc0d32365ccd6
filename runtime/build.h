/* From spec to code object: specialize, key, disk lookup, compile, store. */
#ifndef CKJIT_RUNTIME_BUILD_H
#define CKJIT_RUNTIME_BUILD_H

#include "buffer.h"
#include "runtime.h"
#include "spec.h"
#include "../cache/key.h"

typedef struct ckjit_build_result {
  ckjit_buffer code; /* code object; caller frees with ckjit__buf_free */
  ckjit_key key;
  int from_disk;     /* 1 when read from a disk cache */
  double compile_ms; /* 0 when from disk */
} ckjit_build_result;

/* Builds `spec` for `arch` (validated here).  Uses and fills the runtime's
 * disk cache. */
ckjit_status ckjit__build(ckjit_runtime *rt, const ckjit_spec *spec, const char *arch,
                          ckjit_build_result *out);

#endif
