/* Reading a whole file into memory (file_read.h). */
#include "file_read.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *file_read_all(const char *path, int flags, size_t max, size_t *len, int *err) {
  const int use_stdin = (flags & FILE_READ_STDIN) && !strcmp(path, "-");
  int fd = use_stdin ? STDIN_FILENO
                     : open(path, O_RDONLY | O_CLOEXEC | ((flags & FILE_READ_NOFOLLOW) ? O_NOFOLLOW : 0));
  if (fd < 0) {
    *err = errno;
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = errno;
  } else {
    const int regular = S_ISREG(st.st_mode);
    *err = S_ISDIR(st.st_mode)                                       ? EISDIR
           : !regular && (flags & FILE_READ_REGULAR)                 ? EINVAL
           : regular && max && (uintmax_t)st.st_size > (uintmax_t)max ? EFBIG
                                                                      : 0;
  }
  if (*err) {
    if (!use_stdin) close(fd);
    return NULL;
  }
  /* A regular file is read at its size (room for the NUL and one more
   * byte, where its end shows); a pipe grows the buffer. */
  size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 2 : 1 << 16, n = 0;
  char *buf = NULL;
  for (;;) {
    if (max && n > max) {
      *err = EFBIG;
      break;
    }
    if (!buf || n + 1 >= cap) {
      if (buf) cap *= 2;
      char *b = realloc(buf, cap);
      if (!b) {
        *err = ENOMEM;
        break;
      }
      buf = b;
    }
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *err = errno;
      break;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  if (!use_stdin) close(fd);
  if (*err) {
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}
