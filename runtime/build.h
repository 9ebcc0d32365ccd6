/* From spec to code object: specialize, key, disk lookup, compile, store. */
#ifndef CKJIT_RUNTIME_BUILD_H
#define CKJIT_RUNTIME_BUILD_H

#include "../base/buffer.h"
#include "runtime.h"
#include "spec.h"
#include "../cache/key.h"

typedef struct ckjit_build_result {
  ckjit_buffer code; /* code object; caller frees with ckjit__buf_free */
  ckjit_key key;
  int from_disk;     /* 1 when read from a disk cache */
  int from_memory;   /* 1 when this process had compiled it before (runtime/code_cache.h) */
  int from_remote;   /* 1 when fetched from the remote cache (cache/remote.h) */
  double compile_ms; /* 0 unless compiled by this call */
  int stored;        /* 1 when the entry is in the disk cache: found there or written now */
  char store_error[CKJIT_PATH_MAX + 512]; /* why not, when the disk cache is on ("" otherwise) */
} ckjit_build_result;

/* Builds `spec` for `arch` (validated here): the disk cache (and its
 * read-only layers), else this process's code objects in memory (the disk
 * entry is then written again), else the remote cache when one is
 * configured (a verified hit is written to the disk cache; a miss may take
 * the fleet's lease on the key, or wait for its holder's entry), else the
 * compiler.  A compiled code object is kept in memory and stored on disk
 * and in the remote cache; a failed store is not the build's failure (see
 * `stored`). */
ckjit_status ckjit__build(ckjit_runtime *rt, const ckjit_spec *spec, const char *arch,
                          ckjit_build_result *out);

/* Test hook: when set, called with "compile" and the kernel's name right
 * before each compile (tests make a compile slow, or crash inside it,
 * while the process holds the remote lease).  NULL (the default) costs one
 * load per compile. */
extern void (*ckjit__build_test_hook)(const char *stage, const char *kernel);

#endif
