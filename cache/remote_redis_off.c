/* The remote cache's transport in a build without hiredis (meson option
 * `redis` disabled, or auto without libhiredis-dev): every call says so.
 * cache/remote.c never calls them in such a build: asking for the remote
 * tier there is warned about (environment) or refused with
 * CKJIT_ERROR_UNSUPPORTED (ckjit_options.remote_cache). */
#include "remote_redis.h"

#include <stdio.h>

static ckjit_redis_rc off(char *why, size_t len) {
  if (why && len) snprintf(why, len, "this ckjit was built without Redis support (hiredis)");
  return CKJIT_REDIS_REFUSED;
}

int ckjit__redis_available(void) { return 0; }

ckjit_redis_rc ckjit__redis_connect(const ckjit_remote_url *url, int connect_timeout_ms,
                                    int timeout_ms, ckjit_redis **out, char *why, size_t len) {
  (void)url, (void)connect_timeout_ms, (void)timeout_ms;
  *out = NULL;
  return off(why, len);
}

void ckjit__redis_close(ckjit_redis *c) { (void)c; }

ckjit_redis_rc ckjit__redis_get(ckjit_redis *c, const char *name, uint8_t **value, size_t *size,
                                char *why, size_t len) {
  (void)c, (void)name;
  *value = NULL;
  *size = 0;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_set(ckjit_redis *c, const char *name, const void *value, size_t size,
                                int64_t ttl_ms, int nx, char *why, size_t len) {
  (void)c, (void)name, (void)value, (void)size, (void)ttl_ms, (void)nx;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_exists(ckjit_redis *c, const char *name, char *why, size_t len) {
  (void)c, (void)name;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_lease_take(ckjit_redis *c, const char *name, const char *owner,
                                       int64_t ms, char *why, size_t len) {
  (void)c, (void)name, (void)owner, (void)ms;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_lease_renew(ckjit_redis *c, const char *name, const char *owner,
                                        int64_t ms, char *why, size_t len) {
  (void)c, (void)name, (void)owner, (void)ms;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_lease_drop(ckjit_redis *c, const char *name, const char *owner,
                                       char *why, size_t len) {
  (void)c, (void)name, (void)owner;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_scan(ckjit_redis *c, uint64_t *cursor, const char *match,
                                 void (*each)(void *ctx, const char *name, size_t n), void *ctx,
                                 char *why, size_t len) {
  (void)c, (void)cursor, (void)match, (void)each, (void)ctx;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_strlens(ckjit_redis *c, const char *const *names, size_t n,
                                    uint64_t *sizes, char *why, size_t len) {
  (void)c, (void)names, (void)n, (void)sizes;
  return off(why, len);
}

ckjit_redis_rc ckjit__redis_info(ckjit_redis *c, const char *section, char **text, char *why,
                                 size_t len) {
  (void)c, (void)section;
  *text = NULL;
  return off(why, len);
}
