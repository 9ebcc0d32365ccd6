#!/usr/bin/env python3
"""The layers include only downwards: base/ -> cache/ -> runtime/.

base/ (log, error, stats, clock, buffers, integer math) may include
only itself, include/ (the public API) and system headers; cache/ may also
include base/.  Each quoted or angled #include of a file in
base/ or cache/ is resolved the way the compiler does (the including
file's folder, then -Iinclude -I.); one that lands anywhere else in the
project (runtime/, tools/, kernel_src/, tests/, ...) fails the test, printed
as file:line: text.  A self-check first runs the scan on a made-up tree with
one bad include per layer, so the test cannot pass by scanning nothing.

  test_layering.py SOURCE_ROOT
"""
import os
import re
import sys
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include(?:_next)?\s*([<"])([^>"]+)[>"]')
SOURCE_EXTS = ('.c', '.h', '.inc')
SEARCH_DIRS = ('include', '.')  # the build's include_directories('include', '.')

# layer folder -> the project folders its files may include (besides system headers)
LAYERS = {
    'base': ('base', 'include'),
    'cache': ('cache', 'base', 'include'),
}


def under(path, folder):
    return path == folder or path.startswith(folder + '/')


def resolve(root, src_rel, kind, name):
    """The included file's path relative to root, or None (a system header)."""
    candidates = []
    if kind == '"':
        candidates.append(os.path.join(os.path.dirname(src_rel), name))
    candidates += [os.path.join(d, name) for d in SEARCH_DIRS]
    for c in candidates:
        full = os.path.normpath(os.path.join(root, c))
        if os.path.isfile(full):
            rel = os.path.relpath(full, root).replace(os.sep, '/')
            return None if rel.startswith('../') else rel
    return None


def layer_files(root, folder):
    top = os.path.join(root, folder)
    out = []
    for dirpath, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(SOURCE_EXTS):
                out.append(os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, '/'))
    return sorted(out)


def scan(root):
    """Returns (violations, problems, files scanned per layer)."""
    violations, problems, counts = [], [], {}
    for folder, allowed in LAYERS.items():
        files = layer_files(root, folder)
        counts[folder] = len(files)
        if not files:
            problems.append('%s/: no source files found (has the layer moved?)' % folder)
        for f in files:
            with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                for lineno, line in enumerate(fh, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    target = resolve(root, f, m.group(1), m.group(2))
                    if target is None or any(under(target, a) for a in allowed):
                        continue
                    violations.append('%s:%d: %s  (-> %s; %s/ may include only %s and system headers)'
                                      % (f, lineno, line.strip(), target, folder,
                                         ', '.join(a + '/' for a in allowed)))
    return violations, problems, counts


def self_check():
    """The scan must catch an upward include in each layer and accept the allowed ones."""
    files = {
        'include/ckjit/ckjit.h': '',
        'runtime/spec.h': '',
        'base/log.h': '#include "ckjit/ckjit.h"\n#include <stdio.h>\n',
        'base/bad.c': '#include "log.h"\n  #  include "../runtime/spec.h"\n',
        'cache/ok.c': '#include "../base/log.h"\n#include "base/log.h"\n'
                      '#include <xxhash.h>\n#include "ok.h"\n',
        'cache/ok.h': '',
        'cache/bad.h': '#include "runtime/spec.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w') as fh:
                fh.write(text)
        violations, problems, _ = scan(root)
    got = sorted(v.split(':')[0] + ':' + v.split(':')[1] for v in violations)
    want = ['base/bad.c:2', 'cache/bad.h:1']
    if got != want or problems:
        print('layering: SELF-CHECK FAILED: expected violations %s, got %s %s'
              % (want, violations, problems))
        return False
    return True


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    root = sys.argv[1]
    if not self_check():
        return 1
    violations, problems, counts = scan(root)
    for folder, n in counts.items():
        print('layering: %s/: %d files scanned' % (folder, n))
    for p in problems:
        print('layering: FAIL: ' + p)
    for v in violations:
        print('layering: FAIL: ' + v)
    if violations or problems:
        print('layering: %d include(s) of an upper layer, %d problem(s)' % (len(violations), len(problems)))
        return 1
    print('layering: OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
