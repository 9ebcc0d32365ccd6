/* Logging to stderr, controlled by CKJIT_LOG (default: warnings only). */
#ifndef CKJIT_RUNTIME_BASE_LOG_H
#define CKJIT_RUNTIME_BASE_LOG_H

#include "error.h"

enum { CKJIT_LOG_OFF = -1, CKJIT_LOG_ERROR = 0, CKJIT_LOG_WARN = 1, CKJIT_LOG_INFO = 2, CKJIT_LOG_DEBUG = 3 };

int ckjit__log_level(void);
void ckjit__log(int level, const char *fmt, ...) CKJIT_PRINTF(2, 3);

#define CKJIT_LOG_AT(level, ...) \
  do { if (ckjit__log_level() >= (level)) ckjit__log((level), __VA_ARGS__); } while (0)
#define CKJIT_WARN(...) CKJIT_LOG_AT(CKJIT_LOG_WARN, __VA_ARGS__)
#define CKJIT_INFO(...) CKJIT_LOG_AT(CKJIT_LOG_INFO, __VA_ARGS__)
#define CKJIT_DEBUG(...) CKJIT_LOG_AT(CKJIT_LOG_DEBUG, __VA_ARGS__)

#endif
