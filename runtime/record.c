/* CKJIT_RECORD: one appended line per specialization a process builds
 * (see record.h for the format and the concurrency argument). */
#include "record.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "../base/buffer.h"
#include "../base/error.h"
#include "../base/log.h"
#include "../cache/atomic_file.h"

#ifndef PIPE_BUF
#define PIPE_BUF 4096
#endif

typedef struct recorded {
  ckjit_spec spec;
  char arch[CKJIT_ARCH_MAX];
} recorded;

/* The pairs this process has recorded.  Only the first build of a kernel
 * gets here, so a mutex and a linear scan cost nothing that matters. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static recorded *seen;
static size_t n_seen, cap_seen;
static int warned;

int ckjit__record_line(const ckjit_spec *spec, const char *arch, char *buf, size_t len) {
  char text[CKJIT_SPEC_TEXT_MAX];
  if (!arch || !*arch || strlen(arch) >= CKJIT_ARCH_MAX || strpbrk(arch, " \t\r\n#")) return -1;
  /* Formatting a valid spec does not touch the thread's error state. */
  if (ckjit__spec_check(spec) != CKJIT_SUCCESS) return -1;
  if (ckjit__spec_format(spec, text, sizeof text) != CKJIT_SUCCESS) return -1;
  int n = snprintf(buf, len, CKJIT_RECORD_TAG " %d %s %s\n", CKJIT_RECORD_VERSION, arch, text);
  if (n < 0 || (size_t)n >= len) return -1;
  return n;
}

static int already_seen(const ckjit_spec *spec, const char *arch) {
  for (size_t i = 0; i < n_seen; i++)
    if (ckjit__spec_equal(&seen[i].spec, spec) && !strcmp(seen[i].arch, arch)) return 1;
  return 0;
}

static int remember(const ckjit_spec *spec, const char *arch) {
  if (n_seen == cap_seen) {
    size_t cap = cap_seen ? cap_seen * 2 : 32;
    recorded *r = realloc(seen, cap * sizeof *r);
    if (!r) return -1;
    seen = r;
    cap_seen = cap;
  }
  seen[n_seen].spec = *spec;
  ckjit__copy_str(seen[n_seen].arch, sizeof seen[n_seen].arch, arch);
  n_seen++;
  return 0;
}

/* Called with `lock` held. */
static void warn_once(const char *path, const char *what, int err) {
  if (warned) return;
  warned = 1;
  CKJIT_WARN("CKJIT_RECORD=%s: %s%s%s; specializations are not recorded", path, what,
             err ? ": " : "", err ? strerror(err) : "");
}

int ckjit__record(const ckjit_spec *spec, const char *arch) {
  const char *path = getenv("CKJIT_RECORD");
  if (!path || !*path) return 0;
  int saved_errno = errno;
  int rc = 0;
  pthread_mutex_lock(&lock);
  if (already_seen(spec, arch)) goto out;
  char line[PIPE_BUF];
  int n = ckjit__record_line(spec, arch, line, sizeof line);
  if (n < 0) {
    warn_once(path, "cannot format a record line", 0);
    rc = -1;
    goto out;
  }
  /* One O_APPEND write of the whole line (cache/atomic_file.h): concurrent
   * appenders never interleave inside it. */
  ckjit_file_error e;
  const int quiet = ckjit__error_quiet(1); /* best effort: the op succeeded */
  ckjit_status st = ckjit__file_append(path, line, (size_t)n, 0644, 0, &e);
  ckjit__error_quiet(quiet);
  if (st != CKJIT_SUCCESS) {
    const char *what = !strcmp(e.step, "open") ? "cannot open"
                       : e.err                   ? "cannot write"
                                                 : "short write";
    warn_once(path, what, e.err);
    rc = -1;
    goto out;
  }
  /* Remembered only once written, so a failed pair is tried again later. */
  if (remember(spec, arch) != 0) rc = -1; /* out of memory: it may be written twice */
out:
  pthread_mutex_unlock(&lock);
  errno = saved_errno;
  return rc;
}

void ckjit__record_reset(void) {
  pthread_mutex_lock(&lock);
  free(seen);
  seen = NULL;
  n_seen = cap_seen = 0;
  warned = 0;
  pthread_mutex_unlock(&lock);
}
