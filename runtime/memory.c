/* Device-memory helpers, so tools, tests and C users need no vendor headers.
 * Each runs with ckjit's device made current for the call only (see
 * ckjit_device.enter): the caller's current context is left as it was. */
#include "ckjit/ckjit.h"
#include "../base/error.h"
#include "runtime.h"

/* The runtime with its device entered; `stream` as for ckjit_device.enter. */
static ckjit_status enter_device(ckjit_runtime **rt, void *const *stream, ckjit_device_scope *scope) {
  ckjit_status st = ckjit__runtime_device(rt);
  return st ? st : (*rt)->device.enter(&(*rt)->device, stream, scope);
}

ckjit_status ckjit_malloc(void **ptr, size_t bytes) {
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_malloc: ptr is NULL");
  *ptr = NULL;
  if (!bytes) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_malloc: size is 0");
  ckjit_runtime *rt;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(&rt, NULL, &scope);
  if (st) return st;
  st = rt->device.mem_alloc(ptr, bytes);
  rt->device.leave(&rt->device, &scope);
  return st;
}

ckjit_status ckjit_free(void *ptr) {
  if (!ptr) return CKJIT_SUCCESS;
  ckjit_runtime *rt;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(&rt, NULL, &scope);
  if (st) return st;
  st = rt->device.mem_free(ptr);
  rt->device.leave(&rt->device, &scope);
  return st;
}

ckjit_status ckjit_memcpy(void *dst, const void *src, size_t bytes, ckjit_copy_kind kind) {
  if (kind != CKJIT_HOST_TO_DEVICE && kind != CKJIT_DEVICE_TO_HOST && kind != CKJIT_DEVICE_TO_DEVICE)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memcpy: bad copy kind %d", (int)kind);
  if (!bytes) return CKJIT_SUCCESS;
  if (!dst || !src) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memcpy: NULL pointer");
  ckjit_runtime *rt;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(&rt, NULL, &scope);
  if (st) return st;
  st = rt->device.mem_copy(dst, src, bytes, kind);
  rt->device.leave(&rt->device, &scope);
  return st;
}

ckjit_status ckjit_memset(void *ptr, int value, size_t bytes) {
  if (!bytes) return CKJIT_SUCCESS;
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memset: NULL pointer");
  ckjit_runtime *rt;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(&rt, NULL, &scope);
  if (st) return st;
  st = rt->device.mem_set(ptr, value, bytes);
  rt->device.leave(&rt->device, &scope);
  return st;
}

/* NULL synchronizes ckjit's whole device, whatever context is current;
 * another stream must belong to ckjit's device. */
ckjit_status ckjit_synchronize(void *stream) {
  ckjit_runtime *rt;
  ckjit_device_scope scope;
  ckjit_status st = enter_device(&rt, stream ? &stream : NULL, &scope);
  if (st) return st;
  st = rt->device.synchronize(stream);
  rt->device.leave(&rt->device, &scope);
  return st;
}
