/* Device-memory helpers, so tools, tests and C users need no vendor headers. */
#include "ckjit/ckjit.h"
#include "error.h"
#include "runtime.h"

static ckjit_status bound_device(ckjit_runtime **rt) {
  ckjit_status st = ckjit__runtime_device(rt);
  return st ? st : (*rt)->device.bind(&(*rt)->device);
}

ckjit_status ckjit_malloc(void **ptr, size_t bytes) {
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_malloc: ptr is NULL");
  *ptr = NULL;
  if (!bytes) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_malloc: size is 0");
  ckjit_runtime *rt;
  ckjit_status st = bound_device(&rt);
  return st ? st : rt->device.mem_alloc(ptr, bytes);
}

ckjit_status ckjit_free(void *ptr) {
  if (!ptr) return CKJIT_SUCCESS;
  ckjit_runtime *rt;
  ckjit_status st = bound_device(&rt);
  return st ? st : rt->device.mem_free(ptr);
}

ckjit_status ckjit_memcpy(void *dst, const void *src, size_t bytes, ckjit_copy_kind kind) {
  if (kind != CKJIT_HOST_TO_DEVICE && kind != CKJIT_DEVICE_TO_HOST && kind != CKJIT_DEVICE_TO_DEVICE)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memcpy: bad copy kind %d", (int)kind);
  if (!bytes) return CKJIT_SUCCESS;
  if (!dst || !src) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memcpy: NULL pointer");
  ckjit_runtime *rt;
  ckjit_status st = bound_device(&rt);
  return st ? st : rt->device.mem_copy(dst, src, bytes, kind);
}

ckjit_status ckjit_memset(void *ptr, int value, size_t bytes) {
  if (!bytes) return CKJIT_SUCCESS;
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_memset: NULL pointer");
  ckjit_runtime *rt;
  ckjit_status st = bound_device(&rt);
  return st ? st : rt->device.mem_set(ptr, value, bytes);
}

ckjit_status ckjit_synchronize(void *stream) {
  ckjit_runtime *rt;
  ckjit_status st = bound_device(&rt);
  return st ? st : rt->device.synchronize(stream);
}
