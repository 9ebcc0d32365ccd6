/* The remote cache's transport over hiredis (cache/remote_redis.h).  Only
 * this file knows hiredis and the Redis commands; cache/remote.c speaks in
 * gets, sets and leases. */
#include "remote_redis.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

struct ckjit_redis {
  redisContext *ctx;
  int timeout_ms; /* for messages */
};

/* Owner-checked lease renewal and removal: only the process whose owner id
 * is the lease's value may extend or delete it. */
static const char renew_script[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
static const char drop_script[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

int ckjit__redis_available(void) { return 1; }

static void set_why(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_why(char *why, size_t len, const char *fmt, ...) {
  if (!why || !len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, len, fmt, ap);
  va_end(ap);
}

static struct timeval tv_ms(int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  return tv;
}

/* A server that closed the connection makes the next write() raise
 * SIGPIPE, whose default action ends the process: it is blocked on this
 * thread for the command, and consumed if the command raised it. */
typedef struct pipe_guard {
  sigset_t old;
  int pending_before;
} pipe_guard;

static void guard_on(pipe_guard *g) {
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, &g->old);
  sigemptyset(&pending);
  g->pending_before = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
}

static void guard_off(pipe_guard *g) {
  sigset_t pending;
  sigemptyset(&pending);
  if (!g->pending_before && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* The context's error in words ("timed out after N ms" for a timeout). */
static void context_error(const redisContext *ctx, int timeout_ms, int saved_errno, char *why,
                          size_t len) {
  if (ctx->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
                                   saved_errno == ETIMEDOUT || saved_errno == EINPROGRESS))
    set_why(why, len, "timed out after %d ms", timeout_ms);
  else if (ctx->err == REDIS_ERR_EOF)
    set_why(why, len, "the server closed the connection");
  else
    set_why(why, len, "%s", ctx->errstr[0] ? ctx->errstr : "connection error");
}

/* One command: OK with the reply (the caller frees it), IO, or REFUSED for
 * an error reply (its text in `why`). */
static ckjit_redis_rc command(ckjit_redis *c, int argc, const char **argv, const size_t *argvlen,
                              redisReply **out, char *why, size_t len) {
  *out = NULL;
  pipe_guard g;
  guard_on(&g);
  errno = 0;
  redisReply *r = redisCommandArgv(c->ctx, argc, argv, argvlen);
  int e = errno;
  guard_off(&g);
  if (!r) {
    context_error(c->ctx, c->timeout_ms, e, why, len);
    return CKJIT_REDIS_IO;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    set_why(why, len, "%.*s", (int)(r->len < 300 ? r->len : 300), r->str ? r->str : "");
    freeReplyObject(r);
    return CKJIT_REDIS_REFUSED;
  }
  *out = r;
  return CKJIT_REDIS_OK;
}

static ckjit_redis_rc unexpected(redisReply *r, const char *what, char *why, size_t len) {
  set_why(why, len, "unexpected reply type %d to %s", r->type, what);
  freeReplyObject(r);
  return CKJIT_REDIS_REFUSED;
}

static int reply_is_ok(const redisReply *r) {
  return r->type == REDIS_REPLY_STATUS && r->len == 2 && !memcmp(r->str, "OK", 2);
}

ckjit_redis_rc ckjit__redis_connect(const ckjit_remote_url *url, int connect_timeout_ms,
                                    int timeout_ms, ckjit_redis **out, char *why, size_t len) {
  *out = NULL;
  errno = 0;
  redisContext *ctx = url->transport == CKJIT_REMOTE_UNIX
                          ? redisConnectUnixWithTimeout(url->path, tv_ms(connect_timeout_ms))
                          : redisConnectWithTimeout(url->host, url->port, tv_ms(connect_timeout_ms));
  int e = errno;
  if (!ctx) {
    set_why(why, len, "out of memory connecting");
    return CKJIT_REDIS_IO;
  }
  if (ctx->err) {
    context_error(ctx, connect_timeout_ms, e, why, len);
    redisFree(ctx);
    return CKJIT_REDIS_IO;
  }
  (void)fcntl(ctx->fd, F_SETFD, FD_CLOEXEC); /* not into prewarm's workers or exec'ed children */
  if (redisSetTimeout(ctx, tv_ms(timeout_ms)) != REDIS_OK) {
    set_why(why, len, "cannot set the socket's timeout: %s", ctx->errstr);
    redisFree(ctx);
    return CKJIT_REDIS_IO;
  }
  ckjit_redis *c = malloc(sizeof *c);
  if (!c) {
    redisFree(ctx);
    set_why(why, len, "out of memory connecting");
    return CKJIT_REDIS_IO;
  }
  c->ctx = ctx;
  c->timeout_ms = timeout_ms;
  redisReply *r;
  ckjit_redis_rc rc = CKJIT_REDIS_OK;
  if (url->has_password) {
    const char *argv[3] = {"AUTH", url->user, url->password};
    size_t argvlen[3] = {4, strlen(url->user), strlen(url->password)};
    if (!url->user[0]) argv[1] = url->password, argvlen[1] = argvlen[2];
    char reason[320];
    rc = command(c, url->user[0] ? 3 : 2, argv, argvlen, &r, reason, sizeof reason);
    if (rc == CKJIT_REDIS_OK) freeReplyObject(r);
    else set_why(why, len, "authentication failed: %s", reason);
  }
  if (rc == CKJIT_REDIS_OK && url->db) {
    char db[16];
    snprintf(db, sizeof db, "%d", url->db);
    const char *argv[2] = {"SELECT", db};
    size_t argvlen[2] = {6, strlen(db)};
    char reason[320];
    rc = command(c, 2, argv, argvlen, &r, reason, sizeof reason);
    if (rc == CKJIT_REDIS_OK) freeReplyObject(r);
    else set_why(why, len, "SELECT %d failed: %s", url->db, reason);
  }
  if (rc != CKJIT_REDIS_OK) {
    ckjit__redis_close(c);
    return rc;
  }
  *out = c;
  return CKJIT_REDIS_OK;
}

void ckjit__redis_close(ckjit_redis *c) {
  if (!c) return;
  redisFree(c->ctx); /* closes the socket; sends nothing */
  free(c);
}

ckjit_redis_rc ckjit__redis_get(ckjit_redis *c, const char *name, uint8_t **value, size_t *size,
                                char *why, size_t len) {
  *value = NULL;
  *size = 0;
  const char *argv[2] = {"GET", name};
  size_t argvlen[2] = {3, strlen(name)};
  redisReply *r;
  ckjit_redis_rc rc = command(c, 2, argv, argvlen, &r, why, len);
  if (rc != CKJIT_REDIS_OK) return rc;
  if (r->type == REDIS_REPLY_NIL) {
    freeReplyObject(r);
    return CKJIT_REDIS_NIL;
  }
  if (r->type != REDIS_REPLY_STRING) return unexpected(r, "GET", why, len);
  uint8_t *copy = malloc(r->len ? r->len : 1);
  if (!copy) {
    freeReplyObject(r);
    set_why(why, len, "out of memory for a %zu-byte value", (size_t)r->len);
    return CKJIT_REDIS_REFUSED;
  }
  memcpy(copy, r->str, r->len);
  *value = copy;
  *size = r->len;
  freeReplyObject(r);
  return CKJIT_REDIS_OK;
}

ckjit_redis_rc ckjit__redis_set(ckjit_redis *c, const char *name, const void *value, size_t size,
                                int64_t ttl_ms, int nx, char *why, size_t len) {
  const char *argv[6] = {"SET", name, (const char *)value};
  size_t argvlen[6] = {3, strlen(name), size};
  int argc = 3;
  char ttl[24];
  if (ttl_ms > 0) {
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    argv[argc] = "PX", argvlen[argc++] = 2;
    argv[argc] = ttl, argvlen[argc++] = strlen(ttl);
  }
  if (nx) argv[argc] = "NX", argvlen[argc++] = 2;
  redisReply *r;
  ckjit_redis_rc rc = command(c, argc, argv, argvlen, &r, why, len);
  if (rc != CKJIT_REDIS_OK) return rc;
  if (r->type == REDIS_REPLY_NIL) rc = CKJIT_REDIS_NIL;
  else if (!reply_is_ok(r)) return unexpected(r, "SET", why, len);
  freeReplyObject(r);
  return rc;
}

/* A command answered by an integer: OK when it is 1 (or more), NIL for 0. */
static ckjit_redis_rc integer_command(ckjit_redis *c, int argc, const char **argv,
                                      const size_t *argvlen, const char *what, char *why,
                                      size_t len) {
  redisReply *r;
  ckjit_redis_rc rc = command(c, argc, argv, argvlen, &r, why, len);
  if (rc != CKJIT_REDIS_OK) return rc;
  if (r->type != REDIS_REPLY_INTEGER) return unexpected(r, what, why, len);
  rc = r->integer > 0 ? CKJIT_REDIS_OK : CKJIT_REDIS_NIL;
  freeReplyObject(r);
  return rc;
}

ckjit_redis_rc ckjit__redis_exists(ckjit_redis *c, const char *name, char *why, size_t len) {
  const char *argv[2] = {"EXISTS", name};
  size_t argvlen[2] = {6, strlen(name)};
  return integer_command(c, 2, argv, argvlen, "EXISTS", why, len);
}

ckjit_redis_rc ckjit__redis_lease_take(ckjit_redis *c, const char *name, const char *owner,
                                       int64_t ms, char *why, size_t len) {
  char px[24];
  snprintf(px, sizeof px, "%lld", (long long)ms);
  const char *argv[6] = {"SET", name, owner, "NX", "PX", px};
  size_t argvlen[6] = {3, strlen(name), strlen(owner), 2, 2, strlen(px)};
  redisReply *r;
  ckjit_redis_rc rc = command(c, 6, argv, argvlen, &r, why, len);
  if (rc != CKJIT_REDIS_OK) return rc;
  if (r->type == REDIS_REPLY_NIL) rc = CKJIT_REDIS_NIL;
  else if (!reply_is_ok(r)) return unexpected(r, "SET NX", why, len);
  freeReplyObject(r);
  return rc;
}

static ckjit_redis_rc owner_script(ckjit_redis *c, const char *script, const char *name,
                                   const char *owner, const char *arg, char *why, size_t len) {
  const char *argv[6] = {"EVAL", script, "1", name, owner, arg};
  size_t argvlen[6] = {4, strlen(script), 1, strlen(name), strlen(owner), arg ? strlen(arg) : 0};
  return integer_command(c, arg ? 6 : 5, argv, argvlen, "EVAL", why, len);
}

ckjit_redis_rc ckjit__redis_lease_renew(ckjit_redis *c, const char *name, const char *owner,
                                        int64_t ms, char *why, size_t len) {
  char px[24];
  snprintf(px, sizeof px, "%lld", (long long)ms);
  return owner_script(c, renew_script, name, owner, px, why, len);
}

ckjit_redis_rc ckjit__redis_lease_drop(ckjit_redis *c, const char *name, const char *owner,
                                       char *why, size_t len) {
  return owner_script(c, drop_script, name, owner, NULL, why, len);
}

ckjit_redis_rc ckjit__redis_scan(ckjit_redis *c, uint64_t *cursor, const char *match,
                                 void (*each)(void *ctx, const char *name, size_t n), void *ctx,
                                 char *why, size_t len) {
  char cur[24];
  snprintf(cur, sizeof cur, "%llu", (unsigned long long)*cursor);
  const char *argv[6] = {"SCAN", cur, "MATCH", match, "COUNT", "1000"};
  size_t argvlen[6] = {4, strlen(cur), 5, strlen(match), 5, 4};
  redisReply *r;
  ckjit_redis_rc rc = command(c, 6, argv, argvlen, &r, why, len);
  if (rc != CKJIT_REDIS_OK) return rc;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
      r->element[1]->type != REDIS_REPLY_ARRAY)
    return unexpected(r, "SCAN", why, len);
  *cursor = strtoull(r->element[0]->str, NULL, 10);
  const redisReply *names = r->element[1];
  for (size_t i = 0; i < names->elements; i++)
    if (names->element[i]->type == REDIS_REPLY_STRING)
      each(ctx, names->element[i]->str, names->element[i]->len);
  freeReplyObject(r);
  return CKJIT_REDIS_OK;
}

ckjit_redis_rc ckjit__redis_strlens(ckjit_redis *c, const char *const *names, size_t n,
                                    uint64_t *sizes, char *why, size_t len) {
  pipe_guard g;
  guard_on(&g);
  ckjit_redis_rc rc = CKJIT_REDIS_OK;
  for (size_t i = 0; i < n && rc == CKJIT_REDIS_OK; i++) {
    const char *argv[2] = {"STRLEN", names[i]};
    size_t argvlen[2] = {6, strlen(names[i])};
    if (redisAppendCommandArgv(c->ctx, 2, argv, argvlen) != REDIS_OK) rc = CKJIT_REDIS_IO;
  }
  for (size_t i = 0; i < n && rc == CKJIT_REDIS_OK; i++) {
    void *reply = NULL;
    errno = 0;
    if (redisGetReply(c->ctx, &reply) != REDIS_OK || !reply) {
      context_error(c->ctx, c->timeout_ms, errno, why, len);
      rc = CKJIT_REDIS_IO;
      break;
    }
    redisReply *r = reply;
    if (r->type == REDIS_REPLY_INTEGER) {
      sizes[i] = r->integer > 0 ? (uint64_t)r->integer : 0;
    } else {
      set_why(why, len, "STRLEN: %.*s", r->type == REDIS_REPLY_ERROR ? (int)r->len : 0,
              r->type == REDIS_REPLY_ERROR ? r->str : "");
      rc = CKJIT_REDIS_IO; /* replies left unread: the connection cannot be reused */
    }
    freeReplyObject(r);
  }
  guard_off(&g);
  return rc;
}

ckjit_redis_rc ckjit__redis_info(ckjit_redis *c, const char *section, char **text, char *why,
                                 size_t len) {
  *text = NULL;
  const char *argv[2] = {"INFO", section};
  size_t argvlen[2] = {4, strlen(section)};
  redisReply *r;
  ckjit_redis_rc rc = command(c, 2, argv, argvlen, &r, why, len);
  if (rc != CKJIT_REDIS_OK) return rc;
  if (r->type != REDIS_REPLY_STRING) return unexpected(r, "INFO", why, len);
  *text = strndup(r->str, r->len);
  freeReplyObject(r);
  if (!*text) {
    set_why(why, len, "out of memory");
    return CKJIT_REDIS_REFUSED;
  }
  return CKJIT_REDIS_OK;
}
