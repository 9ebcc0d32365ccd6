/* The remote cache tier: a Redis server shared by a fleet, searched after
 * the disk cache and its read-only layers and before compiling
 * (CKJIT_REMOTE_CACHE, ckjit_options.remote_cache).  Protocol-independent:
 * the settings, the names, the circuit breaker, the connection pool and
 * the lease protocol live here; cache/remote_redis.h sends the commands.
 *
 * Values are entry files' bytes (cache/entry.h: header and code object),
 * stored under "ckjit:v1:<32 hex key>"; a value is verified by the caller's
 * `accept` (the disk cache's own rule) before use, and one that fails is a
 * miss, never loaded.
 *
 * Fail-open, never slow: every operation is bounded by the connect and
 * operation timeouts; a failure (refused, timed out, broken, an error
 * reply to a read) opens the circuit breaker with one warning, and while
 * it is open nothing is sent: the build compiles locally.  The breaker
 * lets one operation try again after its back-off (1 s, doubling to 60 s),
 * so a dead server costs at most one timeout per window.  Writes refused
 * by the server (an ACL without SET, a read-only replica, maxmemory with
 * noeviction) open a second breaker for writes only: reads go on.
 *
 * Compile once per fleet: a miss takes the lease "ckjit:v1:lease:<key>"
 * (SET NX PX, the value a unique owner id) before compiling; a thread
 * renews it every lease/3 while the compile runs (owner-checked), and it
 * is deleted (owner-checked) after the store.  A miss that finds the lease
 * held polls for the value (2 ms, growing by half each time to 50 ms) until
 * it comes, the lease is free (it takes it: a crashed holder costs one
 * lease period), or CKJIT_REMOTE_CACHE_WAIT_MS passes; then it compiles
 * itself.  A user that may not write waits on the lease with EXISTS.
 *
 * Thread safety: connections are not shared; a mutex-protected pool hands
 * one to each operation and takes it back, and is held only to do that (never
 * across I/O or a compile).  After fork() the child opens its own. */
#ifndef CKJIT_CACHE_REMOTE_H
#define CKJIT_CACHE_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "ckjit/ckjit.h"
#include "key.h"
#include "remote_url.h"

#define CKJIT_REMOTE_PREFIX "ckjit:v1:"            /* v1: this layout of names and values */
#define CKJIT_REMOTE_LEASE_PREFIX "ckjit:v1:lease:"
#define CKJIT_REMOTE_NAME_MAX 64

#define CKJIT_REMOTE_DEFAULT_CONNECT_TIMEOUT_MS 100
#define CKJIT_REMOTE_DEFAULT_TIMEOUT_MS 1000
#define CKJIT_REMOTE_DEFAULT_LEASE_MS 10000
#define CKJIT_REMOTE_DEFAULT_WAIT_MS 30000
#define CKJIT_REMOTE_DEFAULT_MAX_ENTRY (64ull << 20)
#define CKJIT_REMOTE_BACKOFF_MIN_MS 1000.0
#define CKJIT_REMOTE_BACKOFF_MAX_MS 60000.0
#define CKJIT_REMOTE_POLL_MIN_MS 2.0
#define CKJIT_REMOTE_POLL_MAX_MS 50.0

/* ---- settings (cache/remote_config.c) ------------------------------------
 *   CKJIT_REMOTE_CACHE                    the URL (cache/remote_url.h); unset or "": off
 *   CKJIT_REMOTE_CACHE_PASSWORD_FILE      a file holding the password (one line;
 *                                         replaces a password in the URL)
 *   CKJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS 1..600000, default 100
 *   CKJIT_REMOTE_CACHE_TIMEOUT_MS         per operation, 1..600000, default 1000
 *   CKJIT_REMOTE_CACHE_TTL                seconds an entry lives, 0 (default): no expiry
 *   CKJIT_REMOTE_CACHE_LEASE_MS           100..3600000, default 10000
 *   CKJIT_REMOTE_CACHE_WAIT_MS            bound of a wait on another's lease,
 *                                         0..3600000, default 30000
 *   CKJIT_REMOTE_CACHE_MAX_ENTRY          largest value sent or accepted (the size
 *                                         grammar of CKJIT_CACHE_MAX_SIZE), default 64M
 *   CKJIT_REMOTE_CACHE_BACKOFF_MS         the breaker's first window after a failure,
 *                                         100..60000, default 1000 (doubling to 60 s)
 * A bad number costs one warning and keeps the default. */
typedef struct ckjit_remote_config {
  int enabled;
  ckjit_remote_url url;
  int connect_timeout_ms;
  int timeout_ms;
  int64_t ttl_s;
  int lease_ms;
  int wait_ms;
  uint64_t max_entry;
  int backoff_ms;
} ckjit_remote_config;

/* From the environment (ckjit__disk_configure_env calls it): off when
 * CKJIT_REMOTE_CACHE is unset or empty; a bad URL or password file, or a
 * build without hiredis, costs one warning (the URL redacted) and leaves it
 * off. */
void ckjit__remote_config_env(ckjit_remote_config *cfg);

/* From an explicit URL (ckjit_options.remote_cache, the tools' --remote),
 * the other settings from the environment.  "" is off.
 * CKJIT_ERROR_INVALID_ARGUMENT for a bad URL or password file,
 * CKJIT_ERROR_UNSUPPORTED in a build without hiredis; the message names
 * `what` and the redacted URL. */
ckjit_status ckjit__remote_config_url(ckjit_remote_config *cfg, const char *url, const char *what);

/* ---- names --------------------------------------------------------------- */
void ckjit__remote_entry_name(const ckjit_key *key, char out[CKJIT_REMOTE_NAME_MAX]);
void ckjit__remote_lease_name(const ckjit_key *key, char out[CKJIT_REMOTE_NAME_MAX]);
/* 1 when `name` (n bytes) is an entry's name, with its key in *key. */
int ckjit__remote_name_key(const char *name, size_t n, ckjit_key *key);

/* ---- the circuit breaker (pure: the caller locks and gives the time) ------ */
typedef struct ckjit_breaker {
  int open;          /* failed since the last success */
  int probing;       /* one operation is trying after the back-off */
  double until_ms;   /* nothing is tried before this (monotonic ms) */
  double backoff_ms; /* the current window */
  double first_ms;   /* the first window (0: CKJIT_REMOTE_BACKOFF_MIN_MS); kept by a success */
} ckjit_breaker;

/* 1 when an operation may go: the breaker is closed, or its window has
 * passed and no other operation is trying (this one becomes the probe and
 * must report its outcome). */
int ckjit__breaker_allow(ckjit_breaker *b, double now_ms);
/* A failure: opens the breaker for the back-off (first_ms, 1 s by
 * default, the first time, doubling to 60 s while the probes fail).  Returns 1 when it was closed
 * (the caller warns once). */
int ckjit__breaker_failure(ckjit_breaker *b, double now_ms);
/* A success: closes it.  Returns 1 when it was open. */
int ckjit__breaker_success(ckjit_breaker *b);
/* An allowed operation that was not attempted after all. */
void ckjit__breaker_cancel(ckjit_breaker *b);

/* ---- the tier (cache/remote.c) ------------------------------------------- */
/* Verifies a value for the key asked for: 0 to use it, -1 (with *why) to
 * reject it. */
typedef int (*ckjit_remote_accept)(void *ctx, const uint8_t *value, size_t size, const char **why);

struct ckjit_remote_renewer;

/* What a lookup leaves for the store that follows it. */
typedef struct ckjit_remote_ticket {
  int leased;   /* this process holds the key's lease (renewed until released) */
  int rejected; /* a rejected value was seen: the store replaces it */
  char owner[96];
  struct ckjit_remote_renewer *renewer;
} ckjit_remote_ticket;

/* Looks `key` up: 1 on a hit (the accepted value in *value, malloc'ed,
 * *size bytes), 0 on a miss, when *t may hold the lease (the caller
 * compiles, then calls ckjit__remote_store, or ckjit__remote_release when
 * the compile failed).  Counts remote_hits / remote_misses (one per call),
 * rejects, lease waits, errors and the time spent. */
int ckjit__remote_fetch(const ckjit_remote_config *cfg, const ckjit_key *key,
                        ckjit_remote_accept accept, void *ctx, uint8_t **value, size_t *size,
                        ckjit_remote_ticket *t);

/* Stores an entry's bytes under `key` (SET, PX the TTL; NX unless the
 * lookup rejected the value there) unless they are larger than
 * max_entry, then releases the lease.  Never fails: a refused or failed
 * write is counted and warned about (once). */
void ckjit__remote_store(const ckjit_remote_config *cfg, const ckjit_key *key, const uint8_t *entry,
                         size_t size, ckjit_remote_ticket *t);

/* Stops renewing and deletes the lease (owner-checked) if *t holds it. */
void ckjit__remote_release(const ckjit_remote_config *cfg, const ckjit_key *key,
                           ckjit_remote_ticket *t);

#endif
