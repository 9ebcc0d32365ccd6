#include "comgr_policy.h"

#include <pthread.h>
#include <stdlib.h>

#include "../base/log.h"

static void apply(void) {
  const char *v = getenv("AMD_COMGR_CACHE");
  if (v) {
    CKJIT_DEBUG("AMD_COMGR_CACHE=%s set by the user; leaving comgr's own cache as asked", v);
    return;
  }
  if (setenv("AMD_COMGR_CACHE", "0", 0) == 0)
    CKJIT_DEBUG("AMD_COMGR_CACHE=0: comgr's own cache is off, ckjit's disk cache is used");
}

void ckjit__comgr_cache_policy(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, apply);
}
