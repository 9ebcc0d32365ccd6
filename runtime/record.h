/* CKJIT_RECORD=FILE: the specializations an application really uses.
 *
 * When a kernel has been built for the first time in a process (the launch
 * path, runtime/dispatch.c, after success), one line is appended to FILE:
 *
 *   ckjit-spec 1 <arch> <canonical spec>\n
 *
 * e.g. "ckjit-spec 1 sm_90 transpose:dtype=f32,tile=64,vec=4,threads=256".
 * `1` is the record format version; <arch> is the arch the kernel was
 * compiled for; the spec is canonical (every key, in order), so the same
 * specialization always gives the same line.  `ckjit-prewarm --manifest
 * FILE` replays such a file (tools/manifest.h).
 *
 * Many processes may append to one file at once: each line goes out
 * through the one file writer's append (cache/atomic_file.h,
 * ckjit__file_append): the file is opened with
 * O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC (mode 0644, less the umask) for each
 * line and every line goes out in one write() of less than PIPE_BUF bytes,
 * so lines never interleave; nothing is locked.  Each (spec, arch) is
 * recorded once per process.  A failure costs one warning per process and
 * never fails the operation.  ckjit_compile_spec (prewarm) does not record:
 * the file lists what the application used. */
#ifndef CKJIT_RUNTIME_RECORD_H
#define CKJIT_RUNTIME_RECORD_H

#include <stddef.h>
#include "spec.h"

#define CKJIT_RECORD_TAG "ckjit-spec"
#define CKJIT_RECORD_VERSION 1

/* Appends the line of (spec, arch) to $CKJIT_RECORD unless the variable is
 * unset or empty, or this process recorded the pair already.  Returns 0
 * (written, already recorded or recording off) or -1 (failed; warned once). */
int ckjit__record(const ckjit_spec *spec, const char *arch);

/* Formats the record line of (spec, arch), newline included.  Returns its
 * length, or -1 when the spec is invalid or the line does not fit. */
int ckjit__record_line(const ckjit_spec *spec, const char *arch, char *buf, size_t len);

/* Forgets which pairs were recorded and whether a warning was given (tests). */
void ckjit__record_reset(void);

#endif
