/* Prepared calls (include/ckjit/prepared.h): what a family's prepare
 * function fills, and the one run path every family shares.  A family
 * plans the call as its op would (the frame of runtime/ops/op_frame.h),
 * gets the kernel, and leaves the operand pointers of its argument struct
 * as slots that ckjit_prepared_run fills per call. */
#ifndef CKJIT_RUNTIME_OPS_PREPARED_H
#define CKJIT_RUNTIME_OPS_PREPARED_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "ckjit/ckjit.h"
#include "runtime/ops/op_frame.h"

/* The largest family argument struct a prepared call holds. */
#define CKJIT_PREPARED_ARGS_MAX 512

struct ckjit_prepared {
  uint32_t magic;      /* CKJIT_PREPARED_MAGIC while allocated */
  uint64_t generation; /* the runtime's (ckjit_runtime.generation) when prepared */
  ckjit_gpu *gpu;
  /* The one launch: NULL kernel when the plan needs more (scratch memory,
   * several passes): then every run takes `full`. */
  const ckjit_kernel *kernel;
  ckjit_launch_plan plan;
  const ckjit_abi_params *params;
  size_t x_offset, y_offset; /* of the operand pointers in args */
  unsigned align;            /* bytes x and y must be aligned to for `kernel` */
  /* The op's own call with these operands (unaligned operands, or no
   * single launch): the family's public function. */
  ckjit_status (*full)(const ckjit_prepared *p, const void *x, void *y, void *stream);
  struct { /* the public call, for `full` */
    ckjit_dtype dtype;
    int64_t rows, cols, ld_x, ld_y;
    ckjit_softmax_params softmax;
  } call;
  size_t args_size;
  alignas(16) unsigned char args[CKJIT_PREPARED_ARGS_MAX];
};

/* A zeroed prepared call marked allocated, or NULL (out of memory: failed
 * with a message naming `api`). */
ckjit_prepared *ckjit__prepared_new(const char *api);

/* The GPU a prepare function plans for: `device`, or the current one (-1). */
ckjit_status ckjit__prepared_gpu(const char *api, int device, ckjit_gpu **gpu);

#endif
