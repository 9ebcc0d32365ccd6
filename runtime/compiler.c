/* Runtime compilers are identified once per vendor and kept for the process
 * (NVRTC and hipRTC are expensive to load and cheap to keep). */
#include <pthread.h>
#include <string.h>

#include "backend.h"
#include "../base/error.h"

static struct {
  int tried;
  ckjit_status status;
  char message[512];
  ckjit_compiler compiler;
} slots[3];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

ckjit_status ckjit__compiler_get(ckjit_backend vendor, const ckjit_compiler **out) {
  if (vendor != CKJIT_BACKEND_CUDA && vendor != CKJIT_BACKEND_HIP)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "no runtime compiler for backend %d",
                       (int)vendor);
  pthread_mutex_lock(&lock);
  if (!slots[vendor].tried) {
    slots[vendor].status = vendor == CKJIT_BACKEND_CUDA
                               ? ckjit__cuda_compiler_find(&slots[vendor].compiler)
                               : ckjit__hip_compiler_find(&slots[vendor].compiler);
    if (slots[vendor].status)
      strncpy(slots[vendor].message, ckjit__error_latest(), sizeof slots[vendor].message - 1);
    slots[vendor].tried = 1;
  }
  ckjit_status st = slots[vendor].status;
  pthread_mutex_unlock(&lock);
  if (st) return ckjit__fail(st, "%s", slots[vendor].message);
  *out = &slots[vendor].compiler;
  return CKJIT_SUCCESS;
}
