/* The remote cache's transport: the Redis commands the tier and the tools
 * need, over one connection each (hiredis, linked at build time: meson
 * option `redis`).  A build without hiredis compiles remote_redis_off.c
 * instead, whose functions say so.
 *
 * A connection is not thread-safe: one thread uses it at a time
 * (cache/remote.c keeps a pool).  Every call is bounded by the connection's
 * timeouts: connect (TCP or Unix socket, AUTH, SELECT) within the connect
 * timeout per step, every later command within the operation timeout.
 * SIGPIPE is blocked around each command (a server that went away must not
 * kill the process) and a SIGPIPE raised by it is consumed.  Sockets are
 * close-on-exec. */
#ifndef CKJIT_CACHE_REMOTE_REDIS_H
#define CKJIT_CACHE_REMOTE_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "remote_url.h"

typedef struct ckjit_redis ckjit_redis;

typedef enum ckjit_redis_rc {
  CKJIT_REDIS_OK = 0,
  CKJIT_REDIS_NIL = 1,      /* no such key / not set (NX) / not the owner */
  CKJIT_REDIS_IO = -1,      /* connection failed or broke (refused, timeout, EOF): close it */
  CKJIT_REDIS_REFUSED = -2, /* the server answered with an error (NOPERM, WRONGPASS, OOM, ...);
                               the connection is still usable, unless it was the connect */
} ckjit_redis_rc;

/* 1 when this build has the transport (hiredis). */
int ckjit__redis_available(void);

/* Connects and authenticates (AUTH [user] password when the URL has a
 * password) and selects the database.  `why` gets the reason on failure
 * (the server's error text or the system's; never the password). */
ckjit_redis_rc ckjit__redis_connect(const ckjit_remote_url *url, int connect_timeout_ms,
                                    int timeout_ms, ckjit_redis **out, char *why, size_t len);
void ckjit__redis_close(ckjit_redis *c); /* NULL is a no-op */

/* GET: OK with the value (malloc'ed, *size bytes; freed by the caller), NIL
 * when there is no such key. */
ckjit_redis_rc ckjit__redis_get(ckjit_redis *c, const char *name, uint8_t **value, size_t *size,
                                char *why, size_t len);
/* SET name value [PX ttl_ms when > 0] [NX]: OK stored, NIL (NX) already there. */
ckjit_redis_rc ckjit__redis_set(ckjit_redis *c, const char *name, const void *value, size_t size,
                                int64_t ttl_ms, int nx, char *why, size_t len);
/* EXISTS: OK when the key exists, NIL when not. */
ckjit_redis_rc ckjit__redis_exists(ckjit_redis *c, const char *name, char *why, size_t len);

/* Leases: SET name owner NX PX ms (OK taken, NIL held by someone), and the
 * owner-checked renewal (PEXPIRE) and removal (DEL), each one Lua script
 * that compares the value with `owner` first: OK done, NIL not ours. */
ckjit_redis_rc ckjit__redis_lease_take(ckjit_redis *c, const char *name, const char *owner,
                                       int64_t ms, char *why, size_t len);
ckjit_redis_rc ckjit__redis_lease_renew(ckjit_redis *c, const char *name, const char *owner,
                                        int64_t ms, char *why, size_t len);
ckjit_redis_rc ckjit__redis_lease_drop(ckjit_redis *c, const char *name, const char *owner,
                                       char *why, size_t len);

/* One SCAN step over the names matching `match` (a glob): *cursor 0 starts
 * and comes back 0 at the end.  `each` is called with each name (not NUL
 * terminated). */
ckjit_redis_rc ckjit__redis_scan(ckjit_redis *c, uint64_t *cursor, const char *match,
                                 void (*each)(void *ctx, const char *name, size_t n), void *ctx,
                                 char *why, size_t len);
/* STRLEN of each of `n` names, pipelined (0 for a name that is gone). */
ckjit_redis_rc ckjit__redis_strlens(ckjit_redis *c, const char *const *names, size_t n,
                                    uint64_t *sizes, char *why, size_t len);
/* INFO section: the text (malloc'ed). */
ckjit_redis_rc ckjit__redis_info(ckjit_redis *c, const char *section, char **text, char *why,
                                 size_t len);

#endif
