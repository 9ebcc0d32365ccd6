#!/usr/bin/env python3
"""Prints the failed tests of a meson testlog.json that failed with
LeakSanitizer's own tracer crashing at exit, for .ci/run to run once more.

LeakSanitizer stops every thread before it scans for leaks; its tracer
thread sometimes takes a SIGSEGV while vendor compiler threads (hipRTC /
comgr, NVRTC) are running down ("Tracer caught signal 11", then
"LeakSanitizer has encountered a fatal error"): the test ends with status 1
and no leak has been looked for.  Whatever else such a run got wrong, the
second run must pass on its own.  Exit status 0 with the test names on
stdout when every failure is of that kind; 1 when any failure (a timeout,
an error, a failure without the crash) is something else, or there is none.

  lsan_tracer_crashes.py TESTLOG_JSON
"""
import json
import sys

SIGNATURE = ('Tracer caught signal', 'LeakSanitizer has encountered a fatal error')
PASSING = ('OK', 'SKIP', 'EXPECTEDFAIL')


def main():
    names, other = [], []
    with open(sys.argv[1]) as f:
        for line in f:
            r = json.loads(line)
            if r.get('result') in PASSING:
                continue
            text = (r.get('stdout') or '') + (r.get('stderr') or '')
            name = r['name'].split(' / ')[-1]
            crash = r.get('result') == 'FAIL' and all(s in text for s in SIGNATURE)
            (names if crash else other).append(name)
    if other or not names:
        print('failures that are not LeakSanitizer tracer crashes: %s' % (' '.join(other) or 'none'),
              file=sys.stderr)
        return 1
    print(' '.join(names))
    return 0


if __name__ == '__main__':
    sys.exit(main())
