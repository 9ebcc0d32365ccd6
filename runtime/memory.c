/* Device-memory helpers, so tools, tests and C users need no vendor headers.
 * They work on the current device: the GPU of the calling thread's current
 * context (HIP: current device), in its primary context, or the default
 * device (CKJIT_DEVICE) when none is current; ckjit_synchronize on its
 * stream's.  Each runs with that
 * device made current for the call only (ckjit_device.enter): the caller's
 * current context is left as it was. */
#include "ckjit/ckjit.h"
#include "../base/error.h"
#include "dispatch.h"

/* The device of `stream` (NULL: the current one), entered. */
static ckjit_status enter_device(void *stream, ckjit_device **d, ckjit_device_scope *scope) {
  ckjit_gpu *gpu;
  ckjit_status st = stream ? ckjit__stream_gpu(stream, &gpu) : ckjit__current_gpu(&gpu);
  if (st) return st;
  *d = &gpu->device;
  return (*d)->enter(*d, scope);
}

ckjit_status ckjit_malloc(void **ptr, size_t bytes) {
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_malloc: ptr is NULL");
  *ptr = NULL;
  if (!bytes) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_malloc: size is 0");
  ckjit_device *d;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(NULL, &d, &scope);
  if (st) return st;
  st = d->mem_alloc(ptr, bytes);
  d->leave(d, &scope);
  return st;
}

ckjit_status ckjit_free(void *ptr) {
  if (!ptr) return CKJIT_SUCCESS;
  ckjit_device *d;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(NULL, &d, &scope);
  if (st) return st;
  st = d->mem_free(ptr);
  d->leave(d, &scope);
  return st;
}

ckjit_status ckjit_memcpy(void *dst, const void *src, size_t bytes, ckjit_copy_kind kind) {
  if (kind != CKJIT_HOST_TO_DEVICE && kind != CKJIT_DEVICE_TO_HOST && kind != CKJIT_DEVICE_TO_DEVICE)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memcpy: bad copy kind %d", (int)kind);
  if (!bytes) return CKJIT_SUCCESS;
  if (!dst || !src) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memcpy: NULL pointer");
  ckjit_device *d;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(NULL, &d, &scope);
  if (st) return st;
  st = d->mem_copy(dst, src, bytes, kind);
  d->leave(d, &scope);
  return st;
}

ckjit_status ckjit_memset(void *ptr, int value, size_t bytes) {
  if (!bytes) return CKJIT_SUCCESS;
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memset: NULL pointer");
  ckjit_device *d;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(NULL, &d, &scope);
  if (st) return st;
  st = d->mem_set(ptr, value, bytes);
  d->leave(d, &scope);
  return st;
}

/* NULL synchronizes the whole current device. */
ckjit_status ckjit_synchronize(void *stream) {
  ckjit_device *d;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(stream, &d, &scope);
  if (st) return st;
  st = d->synchronize(stream);
  d->leave(d, &scope);
  return st;
}
