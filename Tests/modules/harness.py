"""What Tests/modules/conformance.py and suites.py share: the pass/fail count, running a
tool with a time limit, and pixload's RGBA8 of a file through the CLI (`pixload fetch
--allow-file --no-disk-cache --no-color-management file://... --out x.png`)."""
import os
import subprocess

from PIL import Image


class Harness:
    def __init__(self, build, work):
        self.pixload = os.path.join(build, "bin", "pixload")
        self.modules = os.path.join(build, "lib", "pixload", "codecs")
        self.work = work
        self.passed = self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(("ok    " if ok else "FAIL  ") + what, flush=True)

    def fetch(self, path, *options, env=None, timeout=None):
        """pixload's RGBA8 of path (file://) as a Pillow image, or (None, its output line)."""
        out = os.path.join(self.work, "out.png")
        if os.path.exists(out):
            os.remove(out)
        r = run(self.pixload, "fetch", "--allow-file", "--no-disk-cache", "--no-color-management", *options,
                "file://" + path, "--out", out, env=env, timeout=timeout)
        if r.returncode != 0 or not os.path.exists(out):
            return None, first_line(r)
        return Image.open(out).convert("RGBA"), ""


class TimedOut:
    """What run returns for a process it had to kill: no status, the limit in the output."""

    def __init__(self, args, timeout):
        self.args, self.returncode = args, None
        self.stdout, self.stderr = "", f"timed out after {timeout} s"


def run(*args, env=None, timeout=None, cwd=None):
    try:
        return subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return TimedOut(args, timeout)


def first_line(r):
    text = (r.stdout + r.stderr).strip()
    return text.splitlines()[0] if text else ""


def max_difference(a, b, alpha_only_where_transparent=True):
    if a.size != b.size:
        return 999
    worst = 0
    da, db = a.tobytes(), b.tobytes()
    for i in range(0, len(da), 4):
        if alpha_only_where_transparent and da[i + 3] == 0 and db[i + 3] == 0:
            continue
        worst = max(worst, max(abs(da[i + k] - db[i + k]) for k in range(4)))
    return worst
