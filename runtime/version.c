#include "ckjit/ckjit.h"

unsigned ckjit_version(void) { return CKJIT_VERSION_NUMBER; }
const char *ckjit_version_string(void) { return CKJIT_VERSION_STRING; }

size_t ckjit_dtype_size(ckjit_dtype dtype) {
  switch (dtype) {
  case CKJIT_F32: case CKJIT_I32: return 4;
  case CKJIT_I64: return 8;
  case CKJIT_F16: case CKJIT_BF16: return 2;
  case CKJIT_I8: case CKJIT_FP8_E4M3: case CKJIT_FP8_E5M2: return 1;
  default: return 0;
  }
}

const char *ckjit_dtype_name(ckjit_dtype dtype) {
  switch (dtype) {
  case CKJIT_F32: return "f32";
  case CKJIT_F16: return "f16";
  case CKJIT_BF16: return "bf16";
  case CKJIT_I8: return "i8";
  case CKJIT_FP8_E4M3: return "fp8_e4m3";
  case CKJIT_FP8_E5M2: return "fp8_e5m2";
  case CKJIT_I32: return "i32";
  case CKJIT_I64: return "i64";
  default: return "?";
  }
}
