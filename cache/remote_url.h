/* The remote cache's address (CKJIT_REMOTE_CACHE, ckjit_options.remote_cache)
 * and the one form of it that is ever printed.
 *
 *   redis://[user[:password]@]host[:port][/db]     TCP; port 6379, db 0 by default;
 *                                                  host a name, an IPv4 address or
 *                                                  [an IPv6 address]
 *   unix://[user[:password]@]/path/to.sock[?db=N]  a Unix domain socket (absolute path)
 *
 * User and password may be percent-encoded (%40 for '@', %3A for ':', %2F
 * for '/').  Nothing else is accepted: no other scheme (rediss://, TLS, is
 * refused by name), no blank or control character, no query other than a
 * unix socket's db, nothing after the db.
 *
 * Redaction: every message that names the address uses
 * ckjit__remote_url_redact's form, in which the password is "***".  It is
 * applied to text that does not parse too (a password typed without its '@'
 * is hidden as well), and a parse error never quotes a piece of the URL. */
#ifndef CKJIT_CACHE_REMOTE_URL_H
#define CKJIT_CACHE_REMOTE_URL_H

#include <stddef.h>

#define CKJIT_REMOTE_URL_MAX 1024     /* bytes, with the terminating NUL */
#define CKJIT_REMOTE_SOCKET_MAX 108   /* sun_path, with its NUL */
#define CKJIT_REMOTE_USER_MAX 128
#define CKJIT_REMOTE_PASSWORD_MAX 256
#define CKJIT_REMOTE_HOST_MAX 256
#define CKJIT_REMOTE_DEFAULT_PORT 6379

typedef enum ckjit_remote_transport {
  CKJIT_REMOTE_TCP = 1,
  CKJIT_REMOTE_UNIX = 2,
} ckjit_remote_transport;

typedef struct ckjit_remote_url {
  ckjit_remote_transport transport;
  char host[CKJIT_REMOTE_HOST_MAX];     /* TCP: name or address (IPv6 without brackets) */
  int port;                             /* TCP */
  char path[CKJIT_REMOTE_SOCKET_MAX];   /* UNIX: the socket */
  char user[CKJIT_REMOTE_USER_MAX];     /* "": the default user */
  char password[CKJIT_REMOTE_PASSWORD_MAX];
  int has_password;                     /* AUTH is sent (an empty password is one) */
  int db;                               /* SELECT when not 0 */
  char display[CKJIT_REMOTE_URL_MAX + 8]; /* the URL, password as "***": the only printed form */
} ckjit_remote_url;

/* Parses `text`.  0 on success; -1 with `why` set to what is wrong (never a
 * piece of the text itself, so it cannot hold the password).  `out` is
 * filled either way with at least `display`. */
int ckjit__remote_url_parse(const char *text, ckjit_remote_url *out, char *why, size_t why_len);

/* `text` with the password replaced by "***", for any text (a URL that does
 * not parse included): the userinfo's part after its first ':' before the
 * last '@', or, without an '@', whatever follows the host's ':' when it is
 * not a port number.  Truncated to `len`. */
void ckjit__remote_url_redact(const char *text, char *out, size_t len);

#endif
