/* Lazy, thread-safe initialization from options and environment, device
 * discovery, ckjit_init / ckjit_shutdown and ckjit_get_device_info. */
#include "../base/buffer.h"
#include "runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_table.h"
#include "../cache/settings.h"
#include "code_cache.h"
#include "../base/error.h"
#include "../base/log.h"

static ckjit_runtime runtime;
static _Atomic int initialized; /* acquire-read on the hot path */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

void ckjit_options_init(ckjit_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->backend = CKJIT_BACKEND_AUTO;
  opts->device = -1;
  opts->disk_cache = -1;
}

static int env_flag(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") && strcmp(v, "false") && strcmp(v, "no") && strcmp(v, "off");
}

static ckjit_status open_device(ckjit_runtime *rt, ckjit_backend want, int ordinal) {
  ckjit_status st = CKJIT_ERROR_NO_DEVICE;
  if (want != CKJIT_BACKEND_HIP) {
    st = ckjit__cuda_device_open(ordinal, &rt->device);
    if (st == CKJIT_SUCCESS || want == CKJIT_BACKEND_CUDA) return st;
  }
  char cuda_reason[256];
  ckjit__copy_str(cuda_reason, sizeof cuda_reason, ckjit__error_latest());
  st = ckjit__hip_device_open(ordinal, &rt->device);
  if (st && want == CKJIT_BACKEND_AUTO) {
    char hip_reason[256];
    ckjit__copy_str(hip_reason, sizeof hip_reason, ckjit__error_latest());
    return ckjit__fail(st == CKJIT_ERROR_INVALID_ARGUMENT ? st : CKJIT_ERROR_NO_DEVICE,
                       "no GPU found (CUDA: %s; HIP: %s)", cuda_reason, hip_reason);
  }
  return st;
}

static ckjit_status initialize(const ckjit_options *opts) {
  ckjit_runtime *rt = &runtime;
  memset(rt, 0, sizeof *rt);

  ckjit_backend want = opts->backend;
  const char *env = getenv("CKJIT_BACKEND");
  if (want == CKJIT_BACKEND_AUTO && env && *env) {
    if (!strcmp(env, "cuda")) want = CKJIT_BACKEND_CUDA;
    else if (!strcmp(env, "hip")) want = CKJIT_BACKEND_HIP;
    else if (strcmp(env, "auto"))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "CKJIT_BACKEND=%s: expected cuda, hip or auto",
                         env);
  }
  if (want != CKJIT_BACKEND_AUTO && want != CKJIT_BACKEND_CUDA && want != CKJIT_BACKEND_HIP)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "options.backend=%d is not a backend", (int)want);

  int ordinal = opts->device;
  if (ordinal < 0 && (env = getenv("CKJIT_DEVICE")) && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v > 1024)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "CKJIT_DEVICE=%s is not a device ordinal", env);
    ordinal = (int)v;
  }
  if (ordinal < 0) ordinal = 0;

  /* Every check that can fail comes before the device is opened, so a
   * failed initialization holds no device context. */
  const char *arch = opts->arch;
  if (!arch || !*arch) arch = getenv("CKJIT_ARCH");
  if (arch && *arch && ckjit__arch_vendor(arch) == CKJIT_BACKEND_AUTO)
    return ckjit__arch_validate(arch, 0, 0); /* sets the message */

  ckjit_status st = open_device(rt, want, ordinal);
  rt->has_device = st == CKJIT_SUCCESS;
  if (!rt->has_device) {
    if (st == CKJIT_ERROR_INVALID_ARGUMENT) return st;
    rt->device_status = st;
    ckjit__copy_str(rt->device_error, sizeof rt->device_error, ckjit__error_latest());
    CKJIT_INFO("no usable GPU (%s); compile-only mode", rt->device_error);
  }

  char canonical_arch[CKJIT_ARCH_MAX]; /* records and device info show the one spelling */
  if (arch && *arch)
    ckjit__copy_str(rt->arch, sizeof rt->arch, ckjit__arch_canonical(arch, canonical_arch));
  else if (rt->has_device) ckjit__copy_str(rt->arch, sizeof rt->arch, rt->device.arch);
  rt->backend = rt->arch[0] ? ckjit__arch_vendor(rt->arch) : want;
  if (rt->has_device && rt->arch[0] && !ckjit__arch_compatible(rt->arch, rt->device.arch))
    CKJIT_WARN("CKJIT_ARCH=%s differs from the device's arch %s: kernels can be compiled but not "
               "launched",
               rt->arch, rt->device.arch);

  /* Identify the compiler now (file lookups, no loading) so that the first
   * op call, served from the disk cache, does not pay for it. */
  const ckjit_compiler *compiler;
  if (rt->backend == CKJIT_BACKEND_CUDA || rt->backend == CKJIT_BACKEND_HIP) {
    int quiet = ckjit__error_quiet(1); /* a missing compiler fails later, with its message */
    (void)ckjit__compiler_get(rt->backend, &compiler);
    ckjit__error_quiet(quiet);
  }

  int disk = opts->disk_cache;
  if (disk < 0) disk = !env_flag("CKJIT_CACHE_DISABLE");
  rt->disk_requested = disk != 0;
  if (disk) {
    char dir[CKJIT_PATH_MAX];
    int quiet = ckjit__error_quiet(1); /* a warning, not this call's failure */
    int no_dir = ckjit__disk_default_dir(opts->cache_dir, dir, sizeof dir);
    if (no_dir) CKJIT_WARN("%s; using the in-memory cache only", ckjit__error_latest());
    ckjit__error_quiet(quiet);
    if (!no_dir) {
      ckjit__disk_open(&rt->disk, dir);
    }
    /* CKJIT_CACHE_MAX_SIZE, CKJIT_CACHE_MAX_ENTRIES, CKJIT_CACHE_PATH layers */
    ckjit__disk_configure_env(&rt->disk);
    rt->disk_enabled = rt->disk.usable || rt->disk.n_layers > 0;
  }
  if ((env = getenv("CKJIT_DUMP_DIR")) && *env)
    ckjit__copy_str(rt->dump_dir, sizeof rt->dump_dir, env);
  /* Streams and operands of another GPU than ckjit's: a cuStreamGetCtx per
   * launch and a driver query per operand, so by default only where another
   * GPU exists for them to be on.  With one GPU a stream of another context
   * still fails in the driver, and the launch failure is explained then
   * (ckjit__kernel_launch). */
  int check = rt->has_device && rt->device.device_count > 1;
  if ((env = getenv("CKJIT_DEVICE_CHECKS")) && *env && strcmp(env, "auto")) {
    if (!strcmp(env, "0")) check = 0;
    else if (!strcmp(env, "1")) check = rt->has_device;
    else CKJIT_WARN("CKJIT_DEVICE_CHECKS=%s: expected 0, 1 or auto; using auto", env);
  }
  rt->device.check_device = check;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_init(const ckjit_options *opts) {
  ckjit_options defaults;
  ckjit_options_init(&defaults);
  if (opts) {
    if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof defaults)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "ckjit_init: options.struct_size=%zu (call ckjit_options_init first)",
                         opts->struct_size);
    memcpy(&defaults, opts, opts->struct_size);
  }
  pthread_mutex_lock(&init_lock);
  ckjit_status st;
  if (atomic_load(&initialized)) {
    st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                     "ckjit_init: already initialized (ops initialize lazily; call ckjit_shutdown "
                     "before initializing again)");
  } else if ((st = initialize(&defaults)) == CKJIT_SUCCESS) {
    atomic_store_explicit(&initialized, 1, memory_order_release);
  }
  pthread_mutex_unlock(&init_lock);
  return st;
}

ckjit_status ckjit__runtime_get(ckjit_runtime **out) {
  if (!atomic_load_explicit(&initialized, memory_order_acquire)) {
    pthread_mutex_lock(&init_lock);
    ckjit_status st = CKJIT_SUCCESS;
    if (!atomic_load(&initialized)) {
      ckjit_options defaults;
      ckjit_options_init(&defaults);
      if ((st = initialize(&defaults)) == CKJIT_SUCCESS)
        atomic_store_explicit(&initialized, 1, memory_order_release);
    }
    pthread_mutex_unlock(&init_lock);
    if (st) return st;
  }
  *out = &runtime;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit__runtime_device(ckjit_runtime **out) {
  ckjit_status st = ckjit__runtime_get(out);
  if (st) return st;
  if (!(*out)->has_device)
    return ckjit__fail((*out)->device_status ? (*out)->device_status : CKJIT_ERROR_NO_DEVICE,
                       "%s", (*out)->device_error);
  return CKJIT_SUCCESS;
}

static void unload_kernel(ckjit_kernel *k) {
  if (k->module) runtime.device.module_unload(&runtime.device, k->module);
}

void ckjit_shutdown(void) {
  pthread_mutex_lock(&init_lock);
  if (atomic_load(&initialized)) {
    ckjit__memcache_clear(runtime.has_device ? unload_kernel : NULL);
    ckjit__code_cache_clear();
    if (runtime.has_device) runtime.device.close(&runtime.device);
    atomic_store(&initialized, 0);
    memset(&runtime, 0, sizeof runtime);
  }
  pthread_mutex_unlock(&init_lock);
}

ckjit_status ckjit_get_device_info(ckjit_device_info *info) {
  if (!info) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_get_device_info: info is NULL");
  memset(info, 0, sizeof *info);
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_get(&rt);
  if (st) return st;
  info->backend = rt->backend;
  info->has_device = rt->has_device;
  info->device = rt->has_device ? rt->device.ordinal : -1;
  ckjit__copy_str(info->arch, sizeof info->arch, rt->arch);
  if (rt->has_device) {
    ckjit__copy_str(info->device_arch, sizeof info->device_arch, rt->device.arch);
    ckjit__copy_str(info->name, sizeof info->name, rt->device.name);
    info->multiprocessors = rt->device.multiprocessors;
  }
  const ckjit_compiler *c;
  int quiet = ckjit__error_quiet(1); /* no compiler: an empty field, not a failure */
  if (rt->backend != CKJIT_BACKEND_AUTO && ckjit__compiler_get(rt->backend, &c) == CKJIT_SUCCESS)
    ckjit__copy_str(info->compiler, sizeof info->compiler, c->fingerprint);
  ckjit__error_quiet(quiet);
  if (rt->disk_enabled && rt->disk.usable)
    ckjit__copy_str(info->cache_dir, sizeof info->cache_dir, rt->disk.dir);
  return CKJIT_SUCCESS;
}
