/* Prepared calls: the shared run path (include/ckjit/prepared.h).  A run
 * checks what can change between calls -- the runtime (a shutdown), the
 * stream's device, the operands' alignment -- and launches the prepared
 * kernel with the operands written into a copy of the argument struct. */
#include "prepared.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/dispatch.h"
#include "runtime/runtime.h"

#define CKJIT_PREPARED_MAGIC 0x636b7072u /* "ckpr" */

ckjit_prepared *ckjit__prepared_new(const char *api) {
  ckjit_prepared *p = calloc(1, sizeof *p);
  if (!p) {
    ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "%s: out of memory", api);
    return NULL;
  }
  p->magic = CKJIT_PREPARED_MAGIC;
  return p;
}

ckjit_status ckjit__prepared_gpu(const char *api, int device, ckjit_gpu **gpu) {
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_device(&rt);
  if (st) return st;
  if (device < -1 || device >= rt->device_count)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: device %d (this process sees %d; -1: "
                       "the current one)", api, device, rt->device_count);
  return device < 0 ? ckjit__stream_gpu(NULL, gpu) : ckjit__runtime_gpu(rt, device, gpu);
}

ckjit_status ckjit_prepared_run(const ckjit_prepared *p, const void *x, void *y, void *stream) {
  if (!p || p->magic != CKJIT_PREPARED_MAGIC)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "ckjit_prepared_run: %p is not a prepared call", (const void *)p);
  if (!x || !y)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_prepared_run: %s is NULL",
                       x ? "y" : "x");
  const ckjit_runtime *rt = ckjit__runtime_if_ready();
  if (!rt || rt->generation != p->generation)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "ckjit_prepared_run: prepared before ckjit_shutdown; prepare it again");
  ckjit_gpu *gpu;
  ckjit_status st = ckjit__stream_gpu(stream, &gpu);
  if (st) return st;
  if (gpu != p->gpu)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "ckjit_prepared_run: prepared for GPU %d, but stream %p is GPU %d's",
                       p->gpu->device.ordinal, stream, gpu->device.ordinal);
  if (!p->kernel || ((uintptr_t)x | (uintptr_t)y) % p->align) return p->full(p, x, y, stream);
  if (rt->check_pointers) {
    const void *const operands[] = {x, y};
    static const char *const names[] = {"x", "y"};
    if ((st = ckjit__check_pointers(stream, "ckjit_prepared_run", 2, operands, names))) return st;
  }
  alignas(16) unsigned char args[CKJIT_PREPARED_ARGS_MAX];
  memcpy(args, p->args, p->args_size);
  memcpy(args + p->x_offset, &x, sizeof x);
  memcpy(args + p->y_offset, &y, sizeof y);
  atomic_fetch_add_explicit(&gpu->memory_hits, 1, memory_order_relaxed);
  return ckjit__kernel_launch(gpu, p->kernel, p->plan.grid, p->plan.block, p->plan.cluster,
                              p->plan.shared_bytes,
                              stream, args, p->params);
}

void ckjit_prepared_free(ckjit_prepared *p) {
  if (!p || p->magic != CKJIT_PREPARED_MAGIC) return;
  p->magic = 0;
  free(p);
}
