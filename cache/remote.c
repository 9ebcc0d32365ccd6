/* The remote cache tier: names, the circuit breakers, the connection pool,
 * lookups with leases and bounded waits, stores (cache/remote.h). */
#include "remote.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../base/log.h"
#include "../base/stats.h"
#include "remote_redis.h"

#define POOL_MAX 16 /* idle connections kept */
#define WHY_MAX 400

/* ---- names ---------------------------------------------------------------- */
void ckjit__remote_entry_name(const ckjit_key *key, char out[CKJIT_REMOTE_NAME_MAX]) {
  char hex[33];
  ckjit__key_hex(key, hex);
  snprintf(out, CKJIT_REMOTE_NAME_MAX, "%s%s", CKJIT_REMOTE_PREFIX, hex);
}

void ckjit__remote_lease_name(const ckjit_key *key, char out[CKJIT_REMOTE_NAME_MAX]) {
  char hex[33];
  ckjit__key_hex(key, hex);
  snprintf(out, CKJIT_REMOTE_NAME_MAX, "%s%s", CKJIT_REMOTE_LEASE_PREFIX, hex);
}

int ckjit__remote_name_key(const char *name, size_t n, ckjit_key *key) {
  const size_t prefix = sizeof CKJIT_REMOTE_PREFIX - 1;
  if (n != prefix + 32 || memcmp(name, CKJIT_REMOTE_PREFIX, prefix)) return 0;
  char hex[33];
  memcpy(hex, name + prefix, 32);
  hex[32] = '\0';
  for (int i = 0; i < 32; i++)
    if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'))) return 0;
  return ckjit__key_parse(hex, key) == 0;
}

/* ---- the circuit breaker -------------------------------------------------- */
int ckjit__breaker_allow(ckjit_breaker *b, double now_ms) {
  if (!b->open) return 1;
  if (b->probing || now_ms < b->until_ms) return 0;
  b->probing = 1;
  return 1;
}

int ckjit__breaker_failure(ckjit_breaker *b, double now_ms) {
  int was_open = b->open;
  b->backoff_ms = was_open ? b->backoff_ms * 2 : b->first_ms > 0 ? b->first_ms : CKJIT_REMOTE_BACKOFF_MIN_MS;
  if (b->backoff_ms > CKJIT_REMOTE_BACKOFF_MAX_MS) b->backoff_ms = CKJIT_REMOTE_BACKOFF_MAX_MS;
  b->open = 1;
  b->probing = 0;
  b->until_ms = now_ms + b->backoff_ms;
  return !was_open;
}

int ckjit__breaker_success(ckjit_breaker *b) {
  const int was_open = b->open;
  const double first = b->first_ms;
  memset(b, 0, sizeof *b);
  b->first_ms = first;
  return was_open;
}

void ckjit__breaker_cancel(ckjit_breaker *b) { b->probing = 0; }

/* ---- the pool ------------------------------------------------------------- */
/* Process-wide: one server at a time (the runtime's configuration; a new
 * one, or a fork, starts afresh). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int set;
  pid_t pid;
  ckjit_remote_url url; /* the server the pool and breakers are for */
  int connect_timeout_ms, timeout_ms;
  ckjit_redis *idle[POOL_MAX];
  int n_idle;
  ckjit_breaker conn;  /* the server: reads and everything else */
  ckjit_breaker write; /* its writes */
} pool;

typedef enum op_kind { OP_READ, OP_WRITE } op_kind;

typedef struct stale_list {
  ckjit_redis *c[POOL_MAX];
  int n;
} stale_list;

/* Moves the idle connections to `s` (closed outside the lock). */
static void drop_idle(stale_list *s) {
  for (int i = 0; i < pool.n_idle; i++) s->c[s->n++] = pool.idle[i];
  pool.n_idle = 0;
}

static void close_stale(stale_list *s) {
  for (int i = 0; i < s->n; i++) ckjit__redis_close(s->c[i]);
  s->n = 0;
}

/* Points the pool at cfg's server (caller holds the lock). */
static void sync_pool(const ckjit_remote_config *cfg, stale_list *s) {
  if (pool.set && pool.pid == getpid() && pool.connect_timeout_ms == cfg->connect_timeout_ms &&
      pool.timeout_ms == cfg->timeout_ms && pool.conn.first_ms == cfg->backoff_ms &&
      !memcmp(&pool.url, &cfg->url, sizeof pool.url))
    return;
  /* After a fork the idle sockets are the parent's: closed here, never used. */
  drop_idle(s);
  memset(&pool.conn, 0, sizeof pool.conn);
  memset(&pool.write, 0, sizeof pool.write);
  pool.conn.first_ms = pool.write.first_ms = cfg->backoff_ms;
  pool.url = cfg->url;
  pool.connect_timeout_ms = cfg->connect_timeout_ms;
  pool.timeout_ms = cfg->timeout_ms;
  pool.pid = getpid();
  pool.set = 1;
}

static void warn_open(const ckjit_remote_config *cfg, op_kind kind, const char *why, double backoff) {
  if (kind == OP_WRITE)
    CKJIT_WARN("remote cache %s refuses writes (%s): compiled kernels are not shared from this "
               "process; writes are tried again in %.0f s",
               cfg->url.display, why, backoff / 1000);
  else
    CKJIT_WARN("remote cache %s unusable (%s): compiling locally; tried again in %.0f s",
               cfg->url.display, why, backoff / 1000);
}

/* A failed connect or operation: the breaker of `kind` opens (one
 * warning when it was closed) and, for the server's, the idle connections
 * go (they lead to the same server). */
static void note_failure(const ckjit_remote_config *cfg, ckjit_breaker *b, op_kind kind,
                         const char *why, stale_list *s) {
  double now = ckjit__now_ms();
  int opened = ckjit__breaker_failure(b, now);
  if (b == &pool.conn) drop_idle(s);
  if (opened) warn_open(cfg, kind, why, b->backoff_ms);
  else
    CKJIT_DEBUG("remote cache %s: %s; next try in %.0f s", cfg->url.display, why,
                b->backoff_ms / 1000);
}

typedef enum take_rc { TAKE_OK, TAKE_SKIPPED, TAKE_WRITES_OFF, TAKE_FAILED } take_rc;

/* A connection for one operation of `kind`: from the pool, or a new one.
 * TAKE_SKIPPED / TAKE_WRITES_OFF: a breaker is open (nothing was tried);
 * TAKE_FAILED: the connect failed (counted, the breaker told). */
static take_rc take(const ckjit_remote_config *cfg, op_kind kind, ckjit_redis **out) {
  *out = NULL;
  stale_list stale = {.n = 0};
  take_rc rc = TAKE_OK;
  pthread_mutex_lock(&lock);
  sync_pool(cfg, &stale);
  double now = ckjit__now_ms();
  if (kind == OP_WRITE && !ckjit__breaker_allow(&pool.write, now)) {
    rc = TAKE_WRITES_OFF;
  } else if (!ckjit__breaker_allow(&pool.conn, now)) {
    if (kind == OP_WRITE) ckjit__breaker_cancel(&pool.write);
    rc = TAKE_SKIPPED;
  } else if (pool.n_idle) {
    *out = pool.idle[--pool.n_idle];
  }
  pthread_mutex_unlock(&lock);
  close_stale(&stale);
  if (rc != TAKE_OK || *out) return rc;

  char why[WHY_MAX];
  ckjit_redis_rc c = ckjit__redis_connect(&cfg->url, cfg->connect_timeout_ms, cfg->timeout_ms, out,
                                          why, sizeof why);
  if (c == CKJIT_REDIS_OK) return TAKE_OK;
  ckjit__stat_add(CKJIT_STAT_REMOTE_ERRORS, 1);
  pthread_mutex_lock(&lock);
  if (kind == OP_WRITE) ckjit__breaker_cancel(&pool.write);
  note_failure(cfg, &pool.conn, OP_READ, why, &stale);
  pthread_mutex_unlock(&lock);
  close_stale(&stale);
  return TAKE_FAILED;
}

/* Returns the connection of an operation that ended with `rc` and tells
 * the breakers: a broken connection or a refused read counts against the
 * server, a refused write against writes. */
static void give_back(const ckjit_remote_config *cfg, ckjit_redis *c, op_kind kind,
                      ckjit_redis_rc rc, const char *why) {
  stale_list stale = {.n = 0};
  if (rc == CKJIT_REDIS_IO || rc == CKJIT_REDIS_REFUSED) ckjit__stat_add(CKJIT_STAT_REMOTE_ERRORS, 1);
  pthread_mutex_lock(&lock);
  int same = pool.set && pool.pid == getpid() && !memcmp(&pool.url, &cfg->url, sizeof pool.url);
  if (rc == CKJIT_REDIS_IO) {
    if (kind == OP_WRITE) ckjit__breaker_cancel(&pool.write);
    note_failure(cfg, &pool.conn, OP_READ, why, &stale);
    stale.c[stale.n++] = c;
  } else if (rc == CKJIT_REDIS_REFUSED && kind == OP_READ) {
    note_failure(cfg, &pool.conn, OP_READ, why, &stale);
    stale.c[stale.n++] = c;
  } else {
    if (ckjit__breaker_success(&pool.conn))
      CKJIT_INFO("remote cache %s reachable again", cfg->url.display);
    if (kind == OP_WRITE) {
      if (rc == CKJIT_REDIS_REFUSED) note_failure(cfg, &pool.write, OP_WRITE, why, &stale);
      else if (ckjit__breaker_success(&pool.write))
        CKJIT_INFO("remote cache %s takes writes again", cfg->url.display);
    }
    if (same && pool.n_idle < POOL_MAX) pool.idle[pool.n_idle++] = c;
    else stale.c[stale.n++] = c;
  }
  pthread_mutex_unlock(&lock);
  close_stale(&stale);
}

/* ---- leases --------------------------------------------------------------- */
struct ckjit_remote_renewer {
  ckjit_remote_config cfg; /* a copy: the thread outlives nothing, but owns its settings */
  char name[CKJIT_REMOTE_NAME_MAX];
  char owner[96];
  pthread_mutex_t m;
  pthread_cond_t cv;
  int stop;
  pthread_t thread;
};

static void deadline_after(struct timespec *ts, int ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

/* Renews the lease every lease/3 until stopped or the lease is not ours. */
static void *renew_main(void *arg) {
  struct ckjit_remote_renewer *r = arg;
  const int every = r->cfg.lease_ms / 3 > 0 ? r->cfg.lease_ms / 3 : 1;
  struct timespec next;
  deadline_after(&next, every);
  pthread_mutex_lock(&r->m);
  while (!r->stop) {
    if (pthread_cond_timedwait(&r->cv, &r->m, &next) != ETIMEDOUT) continue;
    pthread_mutex_unlock(&r->m);
    deadline_after(&next, every);
    ckjit_redis *c;
    char why[WHY_MAX];
    int lost = 0;
    if (take(&r->cfg, OP_WRITE, &c) == TAKE_OK) {
      ckjit_redis_rc rc =
          ckjit__redis_lease_renew(c, r->name, r->owner, r->cfg.lease_ms, why, sizeof why);
      give_back(&r->cfg, c, OP_WRITE, rc, why);
      lost = rc == CKJIT_REDIS_NIL;
    }
    pthread_mutex_lock(&r->m);
    if (lost) {
      CKJIT_DEBUG("remote cache: lease %s is no longer ours; not renewed", r->name);
      break;
    }
  }
  pthread_mutex_unlock(&r->m);
  return NULL;
}

static void start_renewer(const ckjit_remote_config *cfg, const char *name, ckjit_remote_ticket *t) {
  struct ckjit_remote_renewer *r = calloc(1, sizeof *r);
  if (!r) return;
  r->cfg = *cfg;
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->owner, sizeof r->owner, "%s", t->owner);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&r->m, NULL);
  pthread_cond_init(&r->cv, &attr);
  pthread_condattr_destroy(&attr);
  if (pthread_create(&r->thread, NULL, renew_main, r) != 0) {
    CKJIT_DEBUG("remote cache: no thread to renew lease %s; it may expire during a long compile",
                name);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->m);
    free(r);
    return;
  }
  t->renewer = r;
}

static void stop_renewer(ckjit_remote_ticket *t) {
  struct ckjit_remote_renewer *r = t->renewer;
  if (!r) return;
  pthread_mutex_lock(&r->m);
  r->stop = 1;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->m);
  pthread_join(r->thread, NULL);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->m);
  free(r);
  t->renewer = NULL;
}

/* host:pid:random:sequence, unique across a fleet. */
static void make_owner(char *out, size_t len) {
  static _Atomic unsigned long seq;
  char host[40] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  unsigned long long rnd = 0;
  if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rnd = ((unsigned long long)ts.tv_sec << 30) ^ (unsigned long long)ts.tv_nsec ^
          ((unsigned long long)getpid() << 16);
  }
  snprintf(out, len, "%s:%ld:%016llx:%lu", host, (long)getpid(), rnd,
           (unsigned long)++seq);
}

typedef enum lease_state { LEASE_TAKEN, LEASE_HELD, LEASE_NONE } lease_state;

/* Takes the key's lease, or says whether another process holds it.  A
 * user whose writes are refused asks whether the lease exists (EXISTS), so
 * read-only processes wait for writers too.  LEASE_NONE: no lease to take
 * or wait on (the server is unusable, or nobody holds it and we may not). */
static lease_state take_lease(const ckjit_remote_config *cfg, const char *lease,
                              ckjit_remote_ticket *t) {
  if (!t->owner[0]) make_owner(t->owner, sizeof t->owner);
  ckjit_redis *c;
  char why[WHY_MAX];
  take_rc tr = take(cfg, OP_WRITE, &c);
  if (tr == TAKE_OK) {
    ckjit_redis_rc rc = ckjit__redis_lease_take(c, lease, t->owner, cfg->lease_ms, why, sizeof why);
    give_back(cfg, c, OP_WRITE, rc, why);
    if (rc == CKJIT_REDIS_OK) {
      t->leased = 1;
      start_renewer(cfg, lease, t);
      return LEASE_TAKEN;
    }
    if (rc == CKJIT_REDIS_NIL) return LEASE_HELD;
    if (rc == CKJIT_REDIS_IO) return LEASE_NONE;
  } else if (tr != TAKE_WRITES_OFF) {
    return LEASE_NONE;
  }
  if (take(cfg, OP_READ, &c) != TAKE_OK) return LEASE_NONE;
  ckjit_redis_rc rc = ckjit__redis_exists(c, lease, why, sizeof why);
  give_back(cfg, c, OP_READ, rc, why);
  return rc == CKJIT_REDIS_OK ? LEASE_HELD : LEASE_NONE;
}

void ckjit__remote_release(const ckjit_remote_config *cfg, const ckjit_key *key,
                           ckjit_remote_ticket *t) {
  if (!t->leased) return;
  stop_renewer(t);
  t->leased = 0;
  char lease[CKJIT_REMOTE_NAME_MAX], why[WHY_MAX];
  ckjit__remote_lease_name(key, lease);
  ckjit_redis *c;
  if (take(cfg, OP_WRITE, &c) != TAKE_OK) return; /* it expires by itself */
  ckjit_redis_rc rc = ckjit__redis_lease_drop(c, lease, t->owner, why, sizeof why);
  give_back(cfg, c, OP_WRITE, rc, why);
}

/* ---- lookups -------------------------------------------------------------- */
typedef enum got { GOT_HIT, GOT_NOTHING, GOT_REJECTED, GOT_FAILED } got;

static got get_value(const ckjit_remote_config *cfg, const char *name, ckjit_remote_accept accept,
                     void *ctx, uint8_t **value, size_t *size, ckjit_remote_ticket *t) {
  ckjit_redis *c;
  if (take(cfg, OP_READ, &c) != TAKE_OK) return GOT_FAILED;
  uint8_t *v;
  size_t n;
  char why[WHY_MAX];
  ckjit_redis_rc rc = ckjit__redis_get(c, name, &v, &n, why, sizeof why);
  give_back(cfg, c, OP_READ, rc, why);
  if (rc == CKJIT_REDIS_NIL) return GOT_NOTHING;
  if (rc != CKJIT_REDIS_OK) return GOT_FAILED;
  const char *reason = "";
  if (n > cfg->max_entry) reason = "larger than CKJIT_REMOTE_CACHE_MAX_ENTRY";
  else if (accept(ctx, v, n, &reason) == 0) {
    *value = v;
    *size = n;
    return GOT_HIT;
  }
  if (!t->rejected) {
    t->rejected = 1;
    ckjit__stat_add(CKJIT_STAT_REMOTE_REJECTS, 1);
    CKJIT_WARN("remote cache %s: value %s rejected (%s); not used, recompiling it",
               cfg->url.display, name, reason);
  }
  free(v);
  return GOT_REJECTED;
}

static void sleep_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* With the lease taken: the value may have been stored between our GET and
 * the lease (its writer stores before it deletes the lease), so look once
 * more before compiling. */
static int after_lease(const ckjit_remote_config *cfg, const ckjit_key *key, const char *name,
                       ckjit_remote_accept accept, void *ctx, uint8_t **value, size_t *size,
                       ckjit_remote_ticket *t) {
  if (get_value(cfg, name, accept, ctx, value, size, t) != GOT_HIT) return 0;
  ckjit__remote_release(cfg, key, t);
  return 1;
}

static int fetch(const ckjit_remote_config *cfg, const ckjit_key *key, ckjit_remote_accept accept,
                 void *ctx, uint8_t **value, size_t *size, ckjit_remote_ticket *t) {
  char name[CKJIT_REMOTE_NAME_MAX], lease[CKJIT_REMOTE_NAME_MAX];
  ckjit__remote_entry_name(key, name);
  ckjit__remote_lease_name(key, lease);
  got g = get_value(cfg, name, accept, ctx, value, size, t);
  if (g == GOT_HIT) return 1;
  if (g == GOT_FAILED) return 0;
  lease_state s = take_lease(cfg, lease, t);
  if (s == LEASE_TAKEN) return after_lease(cfg, key, name, accept, ctx, value, size, t);
  if (s == LEASE_NONE) return 0;

  /* Another process is compiling it: wait for its value, or for its lease
   * to go (then take it), within the wait bound. */
  ckjit__stat_add(CKJIT_STAT_REMOTE_LEASE_WAITS, 1);
  const double start = ckjit__now_ms(), deadline = start + cfg->wait_ms;
  double interval = CKJIT_REMOTE_POLL_MIN_MS;
  for (;;) {
    double left = deadline - ckjit__now_ms();
    if (left <= 0) {
      CKJIT_INFO("remote cache %s: waited %.0f ms for another process's compile of %s; compiling "
                 "it here",
                 cfg->url.display, ckjit__now_ms() - start, name);
      return 0;
    }
    sleep_ms(interval < left ? interval : left);
    interval = interval * 1.5 < CKJIT_REMOTE_POLL_MAX_MS ? interval * 1.5 : CKJIT_REMOTE_POLL_MAX_MS;
    g = get_value(cfg, name, accept, ctx, value, size, t);
    if (g == GOT_HIT) return 1;
    if (g == GOT_FAILED) return 0;
    s = take_lease(cfg, lease, t);
    if (s == LEASE_TAKEN) return after_lease(cfg, key, name, accept, ctx, value, size, t);
    if (s == LEASE_NONE) /* its holder just finished, or we may only read */
      return get_value(cfg, name, accept, ctx, value, size, t) == GOT_HIT;
  }
}

int ckjit__remote_fetch(const ckjit_remote_config *cfg, const ckjit_key *key,
                        ckjit_remote_accept accept, void *ctx, uint8_t **value, size_t *size,
                        ckjit_remote_ticket *t) {
  memset(t, 0, sizeof *t);
  *value = NULL;
  *size = 0;
  const double t0 = ckjit__now_ms();
  int hit = fetch(cfg, key, accept, ctx, value, size, t);
  ckjit__stat_add(hit ? CKJIT_STAT_REMOTE_HITS : CKJIT_STAT_REMOTE_MISSES, 1);
  ckjit__stat_add_remote_ms(ckjit__now_ms() - t0);
  return hit;
}

void ckjit__remote_store(const ckjit_remote_config *cfg, const ckjit_key *key, const uint8_t *entry,
                         size_t size, ckjit_remote_ticket *t) {
  const double t0 = ckjit__now_ms();
  char name[CKJIT_REMOTE_NAME_MAX], why[WHY_MAX];
  ckjit__remote_entry_name(key, name);
  ckjit_redis *c;
  if (size > cfg->max_entry) {
    CKJIT_DEBUG("remote cache: %s not sent: %zu bytes, over CKJIT_REMOTE_CACHE_MAX_ENTRY (%llu)",
                name, size, (unsigned long long)cfg->max_entry);
  } else if (take(cfg, OP_WRITE, &c) == TAKE_OK) {
    ckjit_redis_rc rc = ckjit__redis_set(c, name, entry, size, cfg->ttl_s * 1000, !t->rejected, why,
                                         sizeof why);
    give_back(cfg, c, OP_WRITE, rc, why);
    if (rc == CKJIT_REDIS_OK) ckjit__stat_add(CKJIT_STAT_REMOTE_WRITES, 1);
  }
  ckjit__remote_release(cfg, key, t);
  ckjit__stat_add_remote_ms(ckjit__now_ms() - t0);
}
