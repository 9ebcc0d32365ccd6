/* The remote cache's settings: the URL (environment or an explicit one),
 * the password file and the CKJIT_REMOTE_CACHE_* numbers (cache/remote.h). */
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/error.h"
#include "../base/log.h"
#include "remote_redis.h"
#include "settings.h"

/* Each problem is warned about once per process (the library and a tool
 * may read the settings more than once). */
enum {
  WARN_NO_HIREDIS, WARN_URL, WARN_CONNECT_TIMEOUT, WARN_TIMEOUT, WARN_TTL, WARN_LEASE, WARN_WAIT,
  WARN_MAX_ENTRY, WARN_PASSWORD_MODE, WARN_BACKOFF, WARN_COUNT_
};
static int warned[WARN_COUNT_];

static int first_warning(int which) { return !__atomic_exchange_n(&warned[which], 1, __ATOMIC_RELAXED); }

/* An integer variable in [min, max], else the default with one warning. */
static int64_t env_number(const char *name, int64_t def, int64_t min, int64_t max, int which) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  uint64_t n;
  const char *why = "";
  if (ckjit__parse_count(v, &n, &why) == 0 && (int64_t)n >= min && (int64_t)n <= max)
    return (int64_t)n;
  if (first_warning(which))
    CKJIT_WARN("%s=%s: expected a whole number from %lld to %lld; using the default, %lld", name,
               v, (long long)min, (long long)max, (long long)def);
  return def;
}

static void settings_from_env(ckjit_remote_config *cfg) {
  cfg->connect_timeout_ms = (int)env_number("CKJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS",
                                            CKJIT_REMOTE_DEFAULT_CONNECT_TIMEOUT_MS, 1, 600000,
                                            WARN_CONNECT_TIMEOUT);
  cfg->timeout_ms = (int)env_number("CKJIT_REMOTE_CACHE_TIMEOUT_MS", CKJIT_REMOTE_DEFAULT_TIMEOUT_MS,
                                    1, 600000, WARN_TIMEOUT);
  cfg->ttl_s = env_number("CKJIT_REMOTE_CACHE_TTL", 0, 0, (int64_t)1 << 40, WARN_TTL);
  cfg->lease_ms = (int)env_number("CKJIT_REMOTE_CACHE_LEASE_MS", CKJIT_REMOTE_DEFAULT_LEASE_MS, 100,
                                  3600000, WARN_LEASE);
  cfg->wait_ms = (int)env_number("CKJIT_REMOTE_CACHE_WAIT_MS", CKJIT_REMOTE_DEFAULT_WAIT_MS, 0,
                                 3600000, WARN_WAIT);
  cfg->backoff_ms = (int)env_number("CKJIT_REMOTE_CACHE_BACKOFF_MS", (int64_t)CKJIT_REMOTE_BACKOFF_MIN_MS, 100,
                                    (int64_t)CKJIT_REMOTE_BACKOFF_MAX_MS, WARN_BACKOFF);
  cfg->max_entry = CKJIT_REMOTE_DEFAULT_MAX_ENTRY;
  const char *v = getenv("CKJIT_REMOTE_CACHE_MAX_ENTRY");
  const char *why = "";
  uint64_t n;
  if (v && *v) {
    if (ckjit__parse_size(v, &n, &why) == 0 && n > 0 && n <= (512ull << 20))
      cfg->max_entry = n;
    else if (first_warning(WARN_MAX_ENTRY))
      CKJIT_WARN("CKJIT_REMOTE_CACHE_MAX_ENTRY=%s: %s (expected 1 byte to 512M: %s); using the "
                 "default, 64M",
                 v, *why ? why : "out of range", CKJIT_SIZE_GRAMMAR);
  }
}

/* Reads the password file into url->password: one line, its newline
 * dropped.  0, or -1 with `why`. */
static int read_password_file(const char *path, ckjit_remote_url *url, char *why, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    snprintf(why, len, "CKJIT_REMOTE_CACHE_PASSWORD_FILE %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  char buf[CKJIT_REMOTE_PASSWORD_MAX + 2];
  ssize_t n = -1;
  const char *problem = NULL;
  if (fstat(fd, &st) != 0) problem = strerror(errno);
  else if (!S_ISREG(st.st_mode)) problem = "not a regular file";
  else if ((n = read(fd, buf, sizeof buf)) < 0) problem = strerror(errno);
  close(fd);
  if (problem) {
    snprintf(why, len, "CKJIT_REMOTE_CACHE_PASSWORD_FILE %s: %s", path, problem);
    return -1;
  }
  if (n > 0 && buf[n - 1] == '\n') n--;
  if (n > 0 && buf[n - 1] == '\r') n--;
  if ((size_t)n >= CKJIT_REMOTE_PASSWORD_MAX || memchr(buf, '\n', (size_t)n) ||
      memchr(buf, '\0', (size_t)n)) {
    snprintf(why, len,
             "CKJIT_REMOTE_CACHE_PASSWORD_FILE %s: expected one line of at most %d bytes", path,
             CKJIT_REMOTE_PASSWORD_MAX - 1);
    return -1;
  }
  if ((st.st_mode & 077) && first_warning(WARN_PASSWORD_MODE))
    CKJIT_WARN("CKJIT_REMOTE_CACHE_PASSWORD_FILE %s can be read by group or others (mode %03o)",
               path, (unsigned)(st.st_mode & 0777));
  memcpy(url->password, buf, (size_t)n);
  url->password[n] = '\0';
  url->has_password = 1;
  return 0;
}

/* The whole configuration for `text`: 0, or -1 with `why` (cfg->url.display
 * is set either way). */
static int configure(ckjit_remote_config *cfg, const char *text, char *why, size_t len) {
  memset(cfg, 0, sizeof *cfg);
  if (ckjit__remote_url_parse(text, &cfg->url, why, len)) return -1;
  settings_from_env(cfg);
  const char *file = getenv("CKJIT_REMOTE_CACHE_PASSWORD_FILE");
  if (file && *file && read_password_file(file, &cfg->url, why, len)) return -1;
  cfg->enabled = 1;
  return 0;
}

static const char no_hiredis[] =
    "this ckjit was built without Redis support (hiredis: install libhiredis-dev and build with "
    "meson -Dredis=enabled)";

void ckjit__remote_config_env(ckjit_remote_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  const char *text = getenv("CKJIT_REMOTE_CACHE");
  if (!text || !*text) return;
  if (!ckjit__redis_available()) {
    if (first_warning(WARN_NO_HIREDIS))
      CKJIT_WARN("CKJIT_REMOTE_CACHE is set, but %s; going on without the remote cache", no_hiredis);
    return;
  }
  char why[512];
  if (configure(cfg, text, why, sizeof why)) {
    if (first_warning(WARN_URL))
      CKJIT_WARN("CKJIT_REMOTE_CACHE=%s: %s; going on without the remote cache", cfg->url.display,
                 why);
    memset(cfg, 0, sizeof *cfg);
  }
}

ckjit_status ckjit__remote_config_url(ckjit_remote_config *cfg, const char *text, const char *what) {
  memset(cfg, 0, sizeof *cfg);
  if (!text || !*text) return CKJIT_SUCCESS;
  if (!ckjit__redis_available()) {
    ckjit_remote_url shown;
    char ignored[8];
    ckjit__remote_url_parse(text, &shown, ignored, sizeof ignored);
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s=%s: %s", what, shown.display, no_hiredis);
  }
  char why[512];
  if (configure(cfg, text, why, sizeof why)) {
    ckjit_status st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s=%s: %s", what, cfg->url.display,
                                  why);
    memset(cfg, 0, sizeof *cfg);
    return st;
  }
  return CKJIT_SUCCESS;
}
