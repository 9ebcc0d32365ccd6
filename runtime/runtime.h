/* Process-wide runtime state, initialized lazily and once. */
#ifndef CKJIT_RUNTIME_RUNTIME_H
#define CKJIT_RUNTIME_RUNTIME_H

#include "arch.h"
#include "backend.h"
#include "../cache/disk_cache.h"

typedef struct ckjit_runtime {
  ckjit_backend backend;      /* vendor of `arch` */
  int has_device;
  ckjit_device device;        /* valid when has_device */
  char arch[CKJIT_ARCH_MAX];  /* arch kernels are compiled for */
  ckjit_status device_status; /* why there is no device (for the error message) */
  char device_error[512];
  ckjit_disk_cache disk;
  int disk_enabled;
  int disk_requested;            /* the disk cache was asked for (not turned off), usable or not */
  char dump_dir[CKJIT_PATH_MAX]; /* CKJIT_DUMP_DIR, "" when off */
} ckjit_runtime;

/* The initialized runtime (lazy, thread-safe).  Never NULL on success. */
ckjit_status ckjit__runtime_get(ckjit_runtime **out);

/* The runtime with a usable device, or CKJIT_ERROR_NO_DEVICE (with the
 * reason) when there is none. */
ckjit_status ckjit__runtime_device(ckjit_runtime **out);

#endif
