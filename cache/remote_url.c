/* Parsing and redacting the remote cache's URL (cache/remote_url.h).  Pure
 * functions over strings. */
#include "remote_url.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int fail(char *why, size_t len, const char *text) {
  if (why && len) snprintf(why, len, "%s", text);
  return -1;
}

/* Appends text[0..n) to out (at *pos, truncating at len). */
static void put(char *out, size_t len, size_t *pos, const char *text, size_t n) {
  if (!len) return;
  while (n-- && *pos + 1 < len) out[(*pos)++] = *text++;
  out[*pos] = '\0';
}

static int all_digits(const char *p, const char *end) {
  for (; p < end; p++)
    if (*p < '0' || *p > '9') return 0;
  return 1;
}

void ckjit__remote_url_redact(const char *text, char *out, size_t len) {
  size_t pos = 0;
  if (len) out[0] = '\0';
  if (!text) return;
  const char *scheme_end = strstr(text, "://");
  const char *start = scheme_end ? scheme_end + 3 : text;
  const char *at = strrchr(start, '@');
  if (at) {
    const char *colon = memchr(start, ':', (size_t)(at - start));
    if (colon) {
      put(out, len, &pos, text, (size_t)(colon + 1 - text));
      put(out, len, &pos, "***", 3);
      put(out, len, &pos, at, strlen(at));
      return;
    }
    put(out, len, &pos, text, strlen(text));
    return;
  }
  /* No '@': a password typed without it would stand where the port does. */
  const char *end = start + strcspn(start, "/?");
  const char *h = start;
  if (*h == '[') {
    const char *close = memchr(h, ']', (size_t)(end - h));
    h = close ? close : end;
  }
  const char *colon = memchr(h, ':', (size_t)(end - h));
  if (colon && !all_digits(colon + 1, end)) {
    put(out, len, &pos, text, (size_t)(colon + 1 - text));
    put(out, len, &pos, "***", 3);
    put(out, len, &pos, end, strlen(end));
    return;
  }
  put(out, len, &pos, text, strlen(text));
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes [p, end) into out (cap bytes with the NUL).  0, -1 bad
 * escape, -2 too long. */
static int decode(const char *p, const char *end, char *out, size_t cap) {
  size_t n = 0;
  while (p < end) {
    int c = (unsigned char)*p;
    if (c == '%') {
      int hi = end - p > 2 ? hex_value(p[1]) : -1, lo = end - p > 2 ? hex_value(p[2]) : -1;
      if (hi < 0 || lo < 0) return -1;
      c = hi * 16 + lo;
      if (c == 0) return -1;
      p += 3;
    } else {
      p++;
    }
    if (n + 1 >= cap) return -2;
    out[n++] = (char)c;
  }
  out[n] = '\0';
  return 0;
}

static int parse_userinfo(const char *p, const char *end, ckjit_remote_url *u, char *why,
                          size_t len) {
  const char *colon = memchr(p, ':', (size_t)(end - p));
  int rc = decode(p, colon ? colon : end, u->user, sizeof u->user);
  if (rc == -1) return fail(why, len, "bad percent-encoding in the user name");
  if (rc == -2) return fail(why, len, "the user name is longer than 127 bytes");
  if (!colon) return 0;
  if (!u->user[0] && colon + 1 == end)
    return fail(why, len, "an empty user and password before '@'");
  rc = decode(colon + 1, end, u->password, sizeof u->password);
  if (rc == -1) return fail(why, len, "bad percent-encoding in the password");
  if (rc == -2) return fail(why, len, "the password is longer than 255 bytes");
  u->has_password = 1;
  return 0;
}

/* Digits only, at most `max`; -1 otherwise. */
static long long number(const char *p, const char *end, long long max) {
  if (p == end || end - p > 10) return -1;
  long long v = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  return v <= max ? v : -1;
}

static int host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

static int parse_tcp(const char *p, ckjit_remote_url *u, char *why, size_t len) {
  const char *host, *host_end;
  if (*p == '[') {
    host = p + 1;
    host_end = strchr(host, ']');
    if (!host_end) return fail(why, len, "an unclosed '[' in the host");
    if (host_end == host) return fail(why, len, "no host");
    for (const char *c = host; c < host_end; c++)
      if (hex_value(*c) < 0 && *c != ':' && *c != '.')
        return fail(why, len, "the bracketed host is not an IPv6 address");
    p = host_end + 1;
  } else {
    host = p;
    while (host_char(*p)) p++;
    host_end = p;
    if (host_end == host) return fail(why, len, "no host");
    if (*p && *p != ':' && *p != '/' && *p != '?')
      return fail(why, len, "the host has a character other than letters, digits, '.', '-' "
                            "and '_' (an IPv6 address goes in brackets)");
  }
  if ((size_t)(host_end - host) >= sizeof u->host)
    return fail(why, len, "the host name is longer than 255 bytes");
  memcpy(u->host, host, (size_t)(host_end - host));
  u->host[host_end - host] = '\0';
  if (*p == ':') {
    const char *end = p + 1 + strcspn(p + 1, "/?");
    if (end == p + 1) return fail(why, len, "no port after ':'");
    long long port = number(p + 1, end, 65535);
    if (port < 0 && !all_digits(p + 1, end)) return fail(why, len, "the port is not a number");
    if (port < 1) return fail(why, len, "the port is not in 1..65535");
    u->port = (int)port;
    p = end;
  }
  if (*p == '/') {
    const char *end = p + 1 + strcspn(p + 1, "/?");
    if (end > p + 1) {
      long long db = number(p + 1, end, INT32_MAX);
      if (db < 0)
        return fail(why, len, all_digits(p + 1, end) ? "the database number is too large"
                                                     : "the database (after the host's '/') is "
                                                       "not a number");
      u->db = (int)db;
    }
    p = end;
  }
  if (*p == '?') return fail(why, len, "a query ('?') is not accepted in a redis:// URL");
  if (*p) return fail(why, len, "unexpected text after the database number");
  return 0;
}

static int parse_unix(const char *p, ckjit_remote_url *u, char *why, size_t len) {
  if (*p != '/') return fail(why, len, "the socket path must be absolute (unix:///path/to.sock)");
  const char *q = strchr(p, '?');
  size_t n = q ? (size_t)(q - p) : strlen(p);
  if (n <= 1) return fail(why, len, "no socket path");
  if (n >= sizeof u->path) return fail(why, len, "the socket path is longer than 107 bytes");
  memcpy(u->path, p, n);
  u->path[n] = '\0';
  if (q) {
    if (strncmp(q, "?db=", 4)) return fail(why, len, "the only query accepted is ?db=N");
    long long db = number(q + 4, q + strlen(q), INT32_MAX);
    if (db < 0) return fail(why, len, "the database (?db=) is not a number, or too large");
    u->db = (int)db;
  }
  return 0;
}

int ckjit__remote_url_parse(const char *text, ckjit_remote_url *u, char *why, size_t len) {
  memset(u, 0, sizeof *u);
  u->port = CKJIT_REMOTE_DEFAULT_PORT;
  if (why && len) why[0] = '\0';
  ckjit__remote_url_redact(text ? text : "", u->display, sizeof u->display);
  if (!text || !*text) return fail(why, len, "empty");
  if (strlen(text) >= CKJIT_REMOTE_URL_MAX)
    return fail(why, len, "longer than 1023 bytes");
  for (const char *c = text; *c; c++)
    if ((unsigned char)*c <= 0x20 || *c == 0x7f)
      return fail(why, len, "it contains a blank or a control character");
  const char *rest;
  if (!strncmp(text, "redis://", 8)) {
    u->transport = CKJIT_REMOTE_TCP;
    rest = text + 8;
  } else if (!strncmp(text, "unix://", 7)) {
    u->transport = CKJIT_REMOTE_UNIX;
    rest = text + 7;
  } else if (!strncmp(text, "rediss://", 9)) {
    return fail(why, len, "TLS (rediss://) is not supported: use redis:// or unix://");
  } else if (strstr(text, "://")) {
    return fail(why, len, "unknown scheme (expected redis:// or unix://)");
  } else {
    return fail(why, len, "no scheme (expected redis://host[:port][/db] or unix:///path/to.sock)");
  }
  /* The userinfo ends at the last '@' (the host, port and db have none); a
   * unix socket's path starts with '/', so there it ends at the last "@/". */
  const char *at = NULL;
  if (u->transport == CKJIT_REMOTE_TCP) {
    at = strrchr(rest, '@');
  } else if (*rest != '/') {
    for (const char *s = strstr(rest, "@/"); s; s = strstr(s + 1, "@/")) at = s;
    if (!at) return fail(why, len, "the socket path must be absolute (unix:///path/to.sock)");
  }
  if (at) {
    if (parse_userinfo(rest, at, u, why, len)) return -1;
    rest = at + 1;
  }
  return u->transport == CKJIT_REMOTE_TCP ? parse_tcp(rest, u, why, len)
                                          : parse_unix(rest, u, why, len);
}
