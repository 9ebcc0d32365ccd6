/* Thread-local last error (what ckjit_last_error returns). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

#define CKJIT_ERROR_MAX 16384

static _Thread_local char error_text[CKJIT_ERROR_MAX];
static _Thread_local ckjit_status error_status = CKJIT_SUCCESS;
static _Thread_local int error_quiet;
static _Thread_local char quiet_text[1024]; /* the latest failure while quiet */

int ckjit__error_quiet(int quiet) {
  int was = error_quiet;
  error_quiet = quiet;
  return was;
}

ckjit_status ckjit__fail(ckjit_status status, const char *fmt, ...) {
  va_list ap;
  if (error_quiet) {
    va_start(ap, fmt);
    vsnprintf(quiet_text, sizeof quiet_text, fmt, ap);
    va_end(ap);
    CKJIT_DEBUG("%s (not recorded): %s", ckjit_status_string(status), quiet_text);
    return status;
  }
  va_start(ap, fmt);
  vsnprintf(error_text, sizeof error_text, fmt, ap);
  va_end(ap);
  error_status = status;
  CKJIT_DEBUG("%s: %s", ckjit_status_string(status), error_text);
  return status;
}

void ckjit__error_append(const char *fmt, ...) {
  char *text = error_quiet ? quiet_text : error_text;
  size_t cap = error_quiet ? sizeof quiet_text : sizeof error_text;
  size_t used = strlen(text);
  if (used + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text + used, cap - used, fmt, ap);
  va_end(ap);
}

const char *ckjit_last_error(void) { return error_text; }

const char *ckjit__error_latest(void) { return error_quiet ? quiet_text : error_text; }

ckjit_status ckjit_last_status(void) { return error_status; }

const char *ckjit_status_string(ckjit_status status) {
  switch (status) {
  case CKJIT_SUCCESS: return "CKJIT_SUCCESS";
  case CKJIT_ERROR_INVALID_ARGUMENT: return "CKJIT_ERROR_INVALID_ARGUMENT";
  case CKJIT_ERROR_UNSUPPORTED: return "CKJIT_ERROR_UNSUPPORTED";
  case CKJIT_ERROR_NO_DEVICE: return "CKJIT_ERROR_NO_DEVICE";
  case CKJIT_ERROR_BACKEND_UNAVAILABLE: return "CKJIT_ERROR_BACKEND_UNAVAILABLE";
  case CKJIT_ERROR_COMPILE: return "CKJIT_ERROR_COMPILE";
  case CKJIT_ERROR_LOAD: return "CKJIT_ERROR_LOAD";
  case CKJIT_ERROR_LAUNCH: return "CKJIT_ERROR_LAUNCH";
  case CKJIT_ERROR_OUT_OF_MEMORY: return "CKJIT_ERROR_OUT_OF_MEMORY";
  case CKJIT_ERROR_DEVICE: return "CKJIT_ERROR_DEVICE";
  case CKJIT_ERROR_CACHE: return "CKJIT_ERROR_CACHE";
  case CKJIT_ERROR_INTERNAL: return "CKJIT_ERROR_INTERNAL";
  }
  return "CKJIT_ERROR_UNKNOWN";
}
