"""What the end-to-end tests of ckjit-cache, ckjit-prewarm and ckjit-inspect
share (test_tools_e2e.py, test_prewarm_e2e.py; test_inputs_e2e.py takes the
Skip / Failure / check trio, with a harness of its own): the tools run with a scrubbed
environment, their --json output parsed, the cache directory read back, and
the harness that runs the parts.  Shared so that each test checks the tools
the same way and a fix to a helper reaches both.

The compiler is whichever is present: NVRTC (sm_90) and/or hipRTC (gfx90a),
probed once per run; with neither the test exits 77.  Parts whose
subcommand or option does not exist yet (not in the tool's --help) are
skipped with the reason; the test then exits 77 when nothing failed.  Once
they exist, they are checked and fail like everything else.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import traceback

# Canonical text (every key, in order): the tools report specs that way.
SPECS = [
    "elementwise:dtype=f32,op=relu,epilogue=none,vec=4,threads=256,unroll=1",
    "elementwise:dtype=f16,op=add,epilogue=none,vec=4,threads=256,unroll=1",
    "transpose:dtype=f32,tile=64,vec=4,threads=256",
    "transpose:dtype=bf16,tile=32,vec=4,threads=256",
]
HEX32 = re.compile(r"^[0-9a-f]{32}$")


class Skip(Exception):
    pass


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


class Tools:
    def __init__(self, args, work):
        self.cache_tool = args.cache
        self.prewarm_tool = args.prewarm
        self.inspect_tool = args.inspect
        self.work = work
        self.env = dict(os.environ)
        for v in ("CKJIT_CACHE_DIR", "CKJIT_CACHE_DISABLE", "CKJIT_ARCH", "CKJIT_DUMP_DIR",
                  "CKJIT_CACHE_PATH", "CKJIT_CACHE_MAX_SIZE", "CKJIT_CACHE_MAX_ENTRIES",
                  "CKJIT_RECORD", "CKJIT_LOG"):
            self.env.pop(v, None)
        # Nothing may fall back on the user's own cache.
        self.env["XDG_CACHE_HOME"] = os.path.join(work, "xdg")
        self.cache_help = self.run([self.cache_tool, "--help"]).stdout
        self.prewarm_help = self.run([self.prewarm_tool, "--help"]).stdout
        self.archs = []

    def run(self, argv, env=None, timeout=600, stdin=None):
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, input=stdin)
        p.cmd = " ".join(argv)
        return p

    def cache(self, cache_dir, *args, json_out=True, expect=0):
        argv = [self.cache_tool, "--cache-dir", cache_dir] + (["--json"] if json_out else []) + list(args)
        p = self.run(argv)
        if expect is not None:
            check(p.returncode == expect,
                  f"{p.cmd}: exit {p.returncode}, expected {expect}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        if json_out:
            p.json = parse_json(p)
        return p

    def prewarm(self, cache_dir, specs, archs=None, extra=(), expect=0, env=None, json_out=True):
        archs = archs or self.archs
        argv = [self.prewarm_tool, "--cache-dir", cache_dir, "--arch", ",".join(archs)]
        argv += (["--json"] if json_out else []) + list(extra) + list(specs)
        p = self.run(argv, env=env)
        if expect is not None:
            check(p.returncode == expect,
                  f"{p.cmd}: exit {p.returncode}, expected {expect}\nstdout:\n{p.stdout[-3000:]}\n"
                  f"stderr:\n{p.stderr[-3000:]}")
        if json_out:
            p.json = parse_json(p)
        return p

    def has_command(self, name):
        """Whether ckjit-cache lists subcommand `name` in its --help."""
        return re.search(r"^\s+" + re.escape(name) + r"\b", self.cache_help, re.M) is not None

    def need_command(self, name):
        if not self.has_command(name):
            raise Skip(f"ckjit-cache has no '{name}' subcommand yet (not in --help)")

    def need_prewarm_option(self, opt):
        if not re.search(r"(^|[\s,\[])" + re.escape(opt) + r"\b", self.prewarm_help, re.M):
            raise Skip(f"ckjit-prewarm has no '{opt}' option yet (not in --help)")


def parse_json(p):
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise Failure(f"{p.cmd}: stdout is not JSON ({e}):\n{p.stdout[:3000]}\nstderr:\n{p.stderr[-2000:]}")


def entry_files(cache_dir):
    """{key: path} of the entry files below cache_dir."""
    out = {}
    if not os.path.isdir(cache_dir):
        return out
    for sub in sorted(os.listdir(cache_dir)):
        d = os.path.join(cache_dir, sub)
        if len(sub) != 2 or not os.path.isdir(d) or os.path.islink(d):
            continue
        for name in os.listdir(d):
            if name.endswith(".ckjit") and HEX32.match(name[:-6]):
                out[name[:-6]] = os.path.join(d, name)
    return out


def items_by_pair(p):
    items = p.json.get("items")
    check(isinstance(items, list), f"{p.cmd}: no 'items' array in the JSON")
    return {(it["spec"], it["arch"]): it for it in items}


def summary(p):
    s = p.json.get("summary")
    check(isinstance(s, dict), f"{p.cmd}: no 'summary' object in the JSON")
    return s


def parse_json_p(p):
    p.json = parse_json(p)
    return p


def main(run_parts):
    """Parses the tool paths, finds the compilers, calls run_parts(t, part)
    (which runs each check as part(name, fn, *args)) and returns the exit
    status: 1 when a part failed, else 77 when one skipped, else 0."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--prewarm", required=True)
    ap.add_argument("--inspect")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ckjit-tools-")
    t = Tools(args, work)
    results = []

    def part(name, fn, *a):
        try:
            r = fn(t, *a)
            results.append((name, "ok", ""))
            print(f"ok    {name}", flush=True)
            return r
        except Skip as e:
            results.append((name, "skip", str(e)))
            print(f"SKIP  {name}: {e}", flush=True)
        except Failure as e:
            results.append((name, "FAIL", str(e)))
            print(f"FAIL  {name}: {e}", flush=True)
        except Exception:  # a crash of the test itself, or a tool's odd output
            results.append((name, "FAIL", traceback.format_exc()))
            print(f"FAIL  {name}:\n{traceback.format_exc()}", flush=True)
        return None

    try:
        # Which compilers are here?
        for arch in ("sm_90", "gfx90a"):
            p = t.prewarm(os.path.join(work, "probe-" + arch), SPECS[:1], archs=[arch], expect=None)
            if p.returncode == 0:
                t.archs.append(arch)
            else:
                print(f"note: no {arch}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
        if not t.archs:
            print("SKIP: neither NVRTC (sm_90) nor hipRTC (gfx90a) can compile here")
            return 77
        print(f"archs: {', '.join(t.archs)}")
        run_parts(t, part)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    failed = [r for r in results if r[1] == "FAIL"]
    skipped = [r for r in results if r[1] == "skip"]
    print(f"{len(results) - len(failed) - len(skipped)} ok, {len(failed)} failed, {len(skipped)} skipped")
    for name, _, why in skipped:
        print(f"SKIP: {name}: {why}")
    if failed:
        return 1
    return 77 if skipped else 0
