/* ckjit_get_device_count, ckjit_get_device_info and ckjit_get_device_info_for. */
#include "ckjit/ckjit.h"

#include <string.h>

#include "../base/buffer.h"
#include "../base/error.h"
#include "runtime.h"

ckjit_status ckjit_get_device_count(int *count) {
  if (!count) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_get_device_count: count is NULL");
  *count = 0;
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_get(&rt);
  if (st) return st;
  *count = rt->has_device ? rt->device_count : 0;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_get_device_info_for(int device, ckjit_device_info *info) {
  if (!info) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_get_device_info: info is NULL");
  memset(info, 0, sizeof *info);
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_get(&rt);
  if (st) return st;
  ckjit_gpu *gpu = NULL;
  if (device < -1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "ckjit_get_device_info_for: device %d is not an ordinal (-1: the default "
                       "device)", device);
  if (device >= 0 && !rt->has_device)
    return ckjit__fail(rt->device_status ? rt->device_status : CKJIT_ERROR_NO_DEVICE,
                       "ckjit_get_device_info_for: device %d: %s", device, rt->device_error);
  if (rt->has_device && (st = ckjit__runtime_gpu(rt, device < 0 ? rt->default_ordinal : device, &gpu)))
    return st;
  info->backend = rt->backend;
  info->has_device = gpu != NULL;
  info->device = gpu ? gpu->device.ordinal : -1;
  ckjit__copy_str(info->arch, sizeof info->arch, gpu ? gpu->arch : rt->arch);
  if (gpu) {
    ckjit__copy_str(info->device_arch, sizeof info->device_arch, gpu->device.arch);
    ckjit__copy_str(info->name, sizeof info->name, gpu->device.name);
    info->multiprocessors = gpu->device.multiprocessors;
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

ckjit_status ckjit_get_device_info(ckjit_device_info *info) {
  return ckjit_get_device_info_for(-1, info);
}
