#!/usr/bin/env python3
"""Each public header compiles on its own, first, in C11 and in C++17.

Users include whichever header they need first (ckjit/gemm.h without
ckjit/ckjit.h, say), and C++ programs include them too: a header that
depends on being included after another, or that is C-only, breaks a
build outside this project.  Each include/ckjit/*.h goes first into an
otherwise empty translation unit, compiled with warnings as errors by the C
compiler (CC, else cc) and, when one is installed, the C++ compiler (CXX,
else c++; its absence is printed, not failed).  A self-check first compiles
a header that uses a type before it is declared, so the test cannot pass by
compiling nothing.

  test_public_headers.py SOURCE_ROOT
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

C_FLAGS = ['-std=c11', '-Wall', '-Wextra', '-Werror', '-fsyntax-only', '-x', 'c']
CXX_FLAGS = ['-std=c++17', '-Wall', '-Wextra', '-Werror', '-fsyntax-only', '-x', 'c++']


def compiles(compiler, flags, include_dir, header, workdir):
    """(ok, compiler output) for a unit that includes `header` first."""
    unit = os.path.join(workdir, 'unit.txt')
    with open(unit, 'w') as f:
        f.write('#include "%s"\nint main(void) { return 0; }\n' % header)
    r = subprocess.run(compiler + flags + ['-I', include_dir, unit],
                       capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def main():
    root = sys.argv[1]
    include_dir = os.path.join(root, 'include')
    cc = shlex.split(os.environ.get('CC', 'cc'))
    cxx_name = os.environ.get('CXX', 'c++')
    cxx = shlex.split(cxx_name) if shutil.which(shlex.split(cxx_name)[0]) else None
    headers = sorted(os.path.relpath(p, include_dir)
                     for p in glob.glob(os.path.join(include_dir, 'ckjit', '*.h')))
    if len(headers) < 2:
        print('FAIL: found %d public headers under %s' % (len(headers), include_dir))
        return 1
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        # Self-check: a header whose declaration order is wrong must fail.
        bad_dir = os.path.join(work, 'bad')
        os.makedirs(os.path.join(bad_dir, 'x'))
        with open(os.path.join(bad_dir, 'x', 'bad.h'), 'w') as f:
            f.write('typedef struct { later_t field; } early_t;\ntypedef int later_t;\n')
        ok, _ = compiles(cc, C_FLAGS, bad_dir, 'x/bad.h', work)
        if ok:
            print('FAIL: the self-check header compiled; this test would check nothing')
            return 1
        for header in headers:
            for name, compiler, flags in (('C11', cc, C_FLAGS), ('C++17', cxx, CXX_FLAGS)):
                if compiler is None:
                    continue
                ok, out = compiles(compiler, flags, include_dir, header, work)
                print('%s %s first: %s' % (header, name, 'ok' if ok else 'FAIL'))
                if not ok:
                    failures += 1
                    print(out)
    if cxx is None:
        print('no C++ compiler (%s): the C++17 half was not checked' % cxx_name)
    print('%d public headers, %d failures' % (len(headers), failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
