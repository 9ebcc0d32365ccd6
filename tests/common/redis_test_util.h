/* A real redis-server for the remote cache tests (tests/remote/), and a
 * tiny RESP client to look at it and to damage it (header-only, static).
 *
 * rs_start() runs `redis-server` from PATH as a child, listening on a Unix
 * socket in its own temporary directory and, when asked, on a free TCP port
 * of 127.0.0.1, with no persistence (--save "" --appendonly no) and the
 * DEBUG command enabled (tests pause the server with DEBUG SLEEP).  The
 * child dies with the test (PR_SET_PDEATHSIG) and every server still
 * running at exit() is stopped, so a failing test leaves none behind.
 * rs_binary() is NULL when redis-server is missing: the test then skips
 * (exit 77) with the reason. */
#ifndef CKJIT_TESTS_REDIS_TEST_UTIL_H
#define CKJIT_TESTS_REDIS_TEST_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#define RS_MAX_SERVERS 8

typedef struct rs_server {
  pid_t pid;
  char dir[512];    /* its temporary directory (socket, log) */
  char sock[600];   /* the Unix socket */
  int port;         /* TCP port on 127.0.0.1, 0: none */
  char url[700];    /* unix://<sock>, or redis://127.0.0.1:<port> with TCP */
  char password[64]; /* requirepass, "" for none (the RESP client authenticates) */
} rs_server;

static rs_server *rs_running[RS_MAX_SERVERS];

/* The redis-server binary on PATH, or NULL. */
static TU_UNUSED const char *rs_binary(void) {
  static char found[1024];
  if (found[0]) return found;
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/bin:/bin";
  while (*path) {
    size_t n = strcspn(path, ":");
    if (n > 0 && n < 900) {
      char cand[1024];
      snprintf(cand, sizeof cand, "%.*s/redis-server", (int)n, path);
      if (access(cand, X_OK) == 0) {
        snprintf(found, sizeof found, "%s", cand);
        return found;
      }
    }
    path += n;
    if (*path == ':') path++;
  }
  return NULL;
}

static TU_UNUSED double rs_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static TU_UNUSED void rs_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- the RESP client ------------------------------------------------------- */
typedef struct resp_reply {
  char type;        /* '+', '-', ':', '$', '*'; 0 for a nil */
  long long integer;
  char *str;        /* '+', '-', '$' (malloc'ed, NUL-terminated; len bytes) */
  size_t len;
  size_t elements;  /* '*' (the elements are read and dropped, except bulk strings
                       collected into `str` separated by '\n') */
} resp_reply;

static TU_UNUSED void resp_free(resp_reply *r) {
  free(r->str);
  memset(r, 0, sizeof *r);
}

static TU_UNUSED int resp_connect_path(const char *sock) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static TU_UNUSED int resp_send(int fd, int argc, const char *const *argv, const size_t *lens) {
  size_t total = 32;
  for (int i = 0; i < argc; i++) total += (lens ? lens[i] : strlen(argv[i])) + 32;
  char *buf = malloc(total), *p = buf;
  if (!buf) return -1;
  p += sprintf(p, "*%d\r\n", argc);
  for (int i = 0; i < argc; i++) {
    size_t n = lens ? lens[i] : strlen(argv[i]);
    p += sprintf(p, "$%zu\r\n", n);
    memcpy(p, argv[i], n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
  }
  size_t left = (size_t)(p - buf);
  const char *q = buf;
  while (left) {
    ssize_t w = send(fd, q, left, MSG_NOSIGNAL);
    if (w <= 0) {
      free(buf);
      return -1;
    }
    q += w;
    left -= (size_t)w;
  }
  free(buf);
  return 0;
}

static TU_UNUSED int resp_read_exact(int fd, char *out, size_t n) {
  while (n) {
    ssize_t r = recv(fd, out, n, 0);
    if (r <= 0) return -1;
    out += r;
    n -= (size_t)r;
  }
  return 0;
}

static TU_UNUSED int resp_read_line(int fd, char *line, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    if (resp_read_exact(fd, line + n, 1)) return -1;
    if (n && line[n - 1] == '\r' && line[n] == '\n') {
      line[n - 1] = '\0';
      return 0;
    }
    n++;
  }
  return -1;
}

static TU_UNUSED int resp_read(int fd, resp_reply *r) {
  memset(r, 0, sizeof *r);
  char line[512];
  if (resp_read_line(fd, line, sizeof line)) return -1;
  r->type = line[0];
  if (r->type == '+' || r->type == '-') {
    r->str = strdup(line + 1);
    r->len = strlen(line + 1);
  } else if (r->type == ':') {
    r->integer = atoll(line + 1);
  } else if (r->type == '$') {
    long long n = atoll(line + 1);
    if (n < 0) {
      r->type = 0;
      return 0;
    }
    r->str = malloc((size_t)n + 3);
    if (!r->str || resp_read_exact(fd, r->str, (size_t)n + 2)) return -1;
    r->str[n] = '\0';
    r->len = (size_t)n;
  } else if (r->type == '*') {
    long long n = atoll(line + 1);
    if (n < 0) {
      r->type = 0;
      return 0;
    }
    r->elements = (size_t)n;
    size_t cap = 1, used = 0;
    r->str = calloc(1, 1);
    for (long long i = 0; i < n; i++) {
      resp_reply e;
      if (resp_read(fd, &e)) return -1;
      if (e.type == '$' && e.str) {
        char *grown = realloc(r->str, cap + e.len + 1);
        if (!grown) return -1;
        r->str = grown;
        cap += e.len + 1;
        memcpy(r->str + used, e.str, e.len);
        used += e.len;
        r->str[used++] = '\n';
        r->str[used] = '\0';
      }
      resp_free(&e);
    }
    r->len = used;
  } else {
    return -1;
  }
  return 0;
}

/* One command; 0 with the reply, -1 on a connection failure. */
static TU_UNUSED int resp_call(int fd, resp_reply *r, int argc, const char *const *argv,
                               const size_t *lens) {
  memset(r, 0, sizeof *r);
  if (resp_send(fd, argc, argv, lens)) return -1;
  return resp_read(fd, r);
}

/* A connection to `s` (authenticated as the default user when it has a
 * password); -1 on failure. */
static TU_UNUSED int rs_connect(const rs_server *s) {
  int fd = resp_connect_path(s->sock);
  if (fd < 0 || !s->password[0]) return fd;
  const char *argv[2] = {"AUTH", s->password};
  resp_reply r = {0};
  if (resp_call(fd, &r, 2, argv, NULL) || r.type != '+') {
    resp_free(&r);
    close(fd);
    return -1;
  }
  resp_free(&r);
  return fd;
}

/* Runs one command on a fresh connection to `s` (NULL-terminated words);
 * 0 with the reply. */
static TU_UNUSED int rs_cmd(const rs_server *s, resp_reply *r, const char *const *argv) {
  memset(r, 0, sizeof *r);
  int argc = 0;
  while (argv[argc]) argc++;
  int fd = rs_connect(s);
  if (fd < 0) return -1;
  int rc = resp_call(fd, r, argc, argv, NULL);
  close(fd);
  return rc;
}

/* GET name: the value (malloc'ed) or NULL when absent. */
static TU_UNUSED uint8_t *rs_get(const rs_server *s, const char *name, size_t *len) {
  const char *argv[] = {"GET", name, NULL};
  resp_reply r;
  if (rs_cmd(s, &r, argv) || r.type != '$') {
    resp_free(&r);
    return NULL;
  }
  *len = r.len;
  return (uint8_t *)r.str; /* owned by the caller now */
}

/* SET name value (binary); 0 on OK. */
static TU_UNUSED int rs_set(const rs_server *s, const char *name, const void *value, size_t len) {
  int fd = rs_connect(s);
  if (fd < 0) return -1;
  const char *argv[3] = {"SET", name, (const char *)value};
  size_t lens[3] = {3, strlen(name), len};
  resp_reply r = {0};
  int rc = resp_call(fd, &r, 3, argv, lens) || r.type != '+' ? -1 : 0;
  resp_free(&r);
  close(fd);
  return rc;
}

/* An integer command's value (EXISTS, DBSIZE, PTTL, ...); -1000 on failure. */
static TU_UNUSED long long rs_int(const rs_server *s, const char *const *argv) {
  resp_reply r;
  long long v = -1000;
  if (rs_cmd(s, &r, argv) == 0 && r.type == ':') v = r.integer;
  resp_free(&r);
  return v;
}

/* ---- the server ---------------------------------------------------------- */
static TU_UNUSED int rs_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static TU_UNUSED void rs_stop(rs_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
  }
  for (int i = 0; i < RS_MAX_SERVERS; i++)
    if (rs_running[i] == s) rs_running[i] = NULL;
  if (s->dir[0]) {
    tu_rm_rf(s->dir);
    s->dir[0] = '\0';
  }
}

/* Kills the server (SIGKILL) but keeps its directory: "the server died". */
static TU_UNUSED void rs_kill(rs_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
  }
}

static void rs_stop_all(void) {
  for (int i = 0; i < RS_MAX_SERVERS; i++)
    if (rs_running[i]) rs_stop(rs_running[i]);
}

/* Starts a server (`tcp`: also on a free port of 127.0.0.1; `password`:
 * requirepass, or NULL; `extra`: more "--name", "value" arguments, NULL-
 * terminated, or NULL) and waits until it answers PING.  0, or -1 with a
 * message on stderr. */
static TU_UNUSED int rs_start(rs_server *s, int tcp, const char *password,
                              const char *const *extra) {
  static int registered;
  memset(s, 0, sizeof *s);
  const char *bin = rs_binary();
  if (!bin) {
    fprintf(stderr, "redis-server is not on PATH\n");
    return -1;
  }
  char *dir = tu_mkdtemp("redis");
  if (!dir) return -1;
  tu_fmt(s->dir, sizeof s->dir, "%s", dir);
  free(dir);
  tu_fmt(s->sock, sizeof s->sock, "%s/r.sock", s->dir);
  if (password) tu_fmt(s->password, sizeof s->password, "%s", password);
  if (!registered) {
    atexit(rs_stop_all);
    registered = 1;
  }
  for (int attempt = 0; attempt < 5; attempt++) {
    s->port = tcp ? rs_free_port() : 0;
    char port[16], log[700];
    tu_fmt(port, sizeof port, "%d", s->port);
    tu_fmt(log, sizeof log, "%s/redis.log", s->dir);
    const char *argv[64] = {bin, "--port", port, "--bind", "127.0.0.1", "--unixsocket", s->sock,
                            "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                            "--dir", s->dir, "--daemonize", "no", "--logfile", log,
                            "--enable-debug-command", "yes"};
    int argc = 21;
    if (password) argv[argc++] = "--requirepass", argv[argc++] = password;
    for (int i = 0; extra && extra[i] && argc < 62; i++) argv[argc++] = extra[i];
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int null = open("/dev/null", O_RDWR);
      if (null >= 0) dup2(null, 0), dup2(null, 1), dup2(null, 2);
      execv(bin, (char *const *)argv);
      _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < RS_MAX_SERVERS; i++)
      if (!rs_running[i]) {
        rs_running[i] = s;
        break;
      }
    for (int wait = 0; wait < 500; wait++) {
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        s->pid = 0;
        break; /* died: a port taken meanwhile, say */
      }
      int fd = rs_connect(s);
      if (fd >= 0) {
        const char *ping[1] = {"PING"};
        resp_reply r;
        int ok = resp_call(fd, &r, 1, ping, NULL) == 0 && r.type == '+';
        resp_free(&r);
        close(fd);
        if (ok) {
          if (tcp) tu_fmt(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
          else tu_fmt(s->url, sizeof s->url, "unix://%s", s->sock);
          return 0;
        }
      }
      rs_sleep_ms(10);
    }
    if (s->pid) rs_kill(s);
  }
  fprintf(stderr, "redis-server did not start (see %s/redis.log)\n", s->dir);
  return -1;
}

#endif
