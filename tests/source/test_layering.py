#!/usr/bin/env python3
"""The layers include only downwards.

Host:   base/ -> cache/ -> runtime/ (core) -> runtime/ops/ (the op families).
Kernel: kernel_src/core/ and kernel_src/abi/ -> the families' folders
        (kernel_src/elementwise/, rows/, gemm/, attention/); abi/ is also read by the
        host (runtime/), nothing else under kernel_src/ is.

LAYERS says which project folders the files of each layer may include
(besides system headers); a file belongs to the deepest layer folder it is
in (runtime/ops/x.c to runtime/ops, not runtime).  Each quoted or angled
#include is resolved the way the compilers do (the including file's folder,
then -Iinclude -I. -Ikernel_src); one that lands in a folder its layer may
not include fails the test, printed as file:line: text.  A self-check
first runs the scan on a made-up tree with bad includes, so the test cannot
pass by scanning nothing.

  test_layering.py SOURCE_ROOT
"""
import os
import re
import sys
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include(?:_next)?\s*([<"])([^>"]+)[>"]')
SOURCE_EXTS = ('.c', '.h', '.inc', '.cu')
SEARCH_DIRS = ('include', '.', 'kernel_src')  # the build's include_directories (and NVRTC's header names)

HOST_BELOW_OPS = ('runtime', 'cache', 'base', 'include', 'kernel_src/abi')
KERNEL_SHARED = ('kernel_src/core', 'kernel_src/abi')
# layer folder -> the project folders its files may include (besides system headers);
# a listed folder allows everything below it, except deeper layers named in DENIED
LAYERS = {
    'base': ('base', 'include'),
    'cache': ('cache', 'base', 'include'),
    'runtime': HOST_BELOW_OPS,
    'runtime/ops': ('runtime/ops',) + HOST_BELOW_OPS,
    'kernel_src/core': ('kernel_src/core',),
    'kernel_src/abi': ('kernel_src/abi',),
    'kernel_src/elementwise': ('kernel_src/elementwise',) + KERNEL_SHARED,
    'kernel_src/rows': ('kernel_src/rows',) + KERNEL_SHARED,
    'kernel_src/gemm': ('kernel_src/gemm',) + KERNEL_SHARED,
    'kernel_src/attention': ('kernel_src/attention',) + KERNEL_SHARED,
}
# what a layer may not include although a folder above it is allowed
DENIED = {
    'runtime': ('runtime/ops',),  # the runtime's core knows no op family
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


def layer_of(path):
    """The deepest layer folder `path` is in (None: none)."""
    best = None
    for folder in LAYERS:
        if under(path, folder) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def layer_files(root, folder):
    top = os.path.join(root, folder)
    out = []
    for dirpath, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(SOURCE_EXTS):
                rel = os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, '/')
                if layer_of(rel) == folder:
                    out.append(rel)
    return sorted(out)


def allowed_target(folder, target):
    if any(under(target, d) for d in DENIED.get(folder, ())):
        return False
    return any(under(target, a) for a in LAYERS[folder])


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
                    if target is None or allowed_target(folder, target):
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
        'runtime/ops/op.c': '#include "runtime/spec.h"\n#include "abi/x_args.h"\n',
        'runtime/dispatch.c': '#include "spec.h"\n#include "ops/op.h"\n',
        'runtime/ops/op.h': '',
        'kernel_src/abi/x_args.h': '#include "abi/abi.h"\n',
        'kernel_src/abi/abi.h': '#include "core/prelude.h"\n',
        'kernel_src/core/prelude.h': '',
        'kernel_src/rows/r.cu': '#include "core/prelude.h"\n#include "abi/x_args.h"\n'
                                '#include "gemm/g.h"\n',
        'kernel_src/gemm/g.h': '#include "core/prelude.h"\n',
        'runtime/bad.c': '#include "rows/r.cu"\n',
        'kernel_src/elementwise/e.cu': '#include "abi/x_args.h"\n',
        'kernel_src/attention/a.cu': '#include "core/prelude.h"\n#include "attention/p.h"\n',
        'kernel_src/attention/p.h': '#include "abi/x_args.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w') as fh:
                fh.write(text)
        violations, problems, _ = scan(root)
    got = sorted(v.split(':')[0] + ':' + v.split(':')[1] for v in violations)
    want = ['base/bad.c:2', 'cache/bad.h:1', 'kernel_src/abi/abi.h:1', 'kernel_src/rows/r.cu:3',
            'runtime/bad.c:1', 'runtime/dispatch.c:2']
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
