/* stderr logging; the level comes from CKJIT_LOG once per process. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level = CKJIT_LOG_WARN;
static pthread_once_t level_once = PTHREAD_ONCE_INIT;

static void read_level(void) {
  const char *s = getenv("CKJIT_LOG");
  if (!s || !*s) return;
  if (!strcmp(s, "off") || !strcmp(s, "none")) level = CKJIT_LOG_OFF;
  else if (!strcmp(s, "error")) level = CKJIT_LOG_ERROR;
  else if (!strcmp(s, "warn") || !strcmp(s, "warning")) level = CKJIT_LOG_WARN;
  else if (!strcmp(s, "info")) level = CKJIT_LOG_INFO;
  else if (!strcmp(s, "debug")) level = CKJIT_LOG_DEBUG;
  else fprintf(stderr, "ckjit: warning: CKJIT_LOG=%s is not one of off|error|warn|info|debug\n", s);
}

int ckjit__log_level(void) {
  pthread_once(&level_once, read_level);
  return level;
}

void ckjit__log(int lvl, const char *fmt, ...) {
  static const char *names[] = {"error", "warning", "info", "debug"};
  if (lvl > ckjit__log_level() || lvl < 0 || lvl > 3) return;
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* One fprintf per message so lines from several threads do not interleave. */
  fprintf(stderr, "ckjit: %s: %s\n", names[lvl], line);
}
