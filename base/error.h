/* Error reporting: every failure sets a thread-local status + message. */
#ifndef CKJIT_RUNTIME_BASE_ERROR_H
#define CKJIT_RUNTIME_BASE_ERROR_H

#include "ckjit/ckjit.h"

#if defined(__GNUC__)
#define CKJIT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CKJIT_PRINTF(a, b)
#endif

/* Records `status` and a formatted message for ckjit_last_error(), logs it at
 * debug level and returns `status`, so callers can `return ckjit__fail(...)`. */
ckjit_status ckjit__fail(ckjit_status status, const char *fmt, ...) CKJIT_PRINTF(2, 3);

/* Sets whether failures on this thread are only logged, not recorded, and
 * returns the previous setting.  For best-effort steps (writing the disk
 * cache) whose failure must not show in ckjit_last_error() of a call that
 * succeeds. */
int ckjit__error_quiet(int quiet);

/* The message of the latest failure on this thread, recorded or quiet: for
 * code that keeps a failure's message (e.g. to report it again later). */
const char *ckjit__error_latest(void);

/* Appends text to the current thread's error message (e.g. a compiler log). */
void ckjit__error_append(const char *fmt, ...) CKJIT_PRINTF(1, 2);

#endif
