"""Finding the library, its version, and the ctypes structs against the C header."""
import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import pixload
from pixload import _ffi

from conftest import ROOT


def header_macro(name):
    text = (ROOT / "include/pixload.h").read_text()
    return int(re.search(rf"#define {name} (\d+)", text).group(1))


def test_version_matches_header():
    major, minor, patch = (header_macro(f"PXL_VERSION_{p}") for p in ("MAJOR", "MINOR", "PATCH"))
    assert (_ffi.PXL_VERSION_MAJOR, _ffi.PXL_VERSION_MINOR, _ffi.PXL_VERSION_PATCH) == (major, minor, patch)
    loaded = _ffi.lib.pxl_version_num()
    assert loaded >> 16 == major and loaded >= pixload.BINDINGS_VERSION_NUM
    assert pixload.version() == f"{loaded >> 16}.{(loaded >> 8) & 0xFF}.{loaded & 0xFF}"


def test_status_enum_matches_header():
    text = (ROOT / "include/pixload.h").read_text()
    in_header = {m.group(1): int(m.group(2)) for m in re.finditer(r"PXL_(OK|E_\w+) = (\d+)", text)}
    ours = {("OK" if s.name == "OK" else "E_" + s.name): int(s) for s in pixload.Status}
    assert ours == in_header
    assert pixload.status_string(pixload.Status.CANCELLED) == "cancelled"


STRUCTS = ["pxl_config", "pxl_request", "pxl_result", "pxl_stats", "pxl_table_config", "pxl_table_stats"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to read the header's layout")
def test_struct_layout_matches_header(tmp_path):
    """Every field's offset and every struct's size as the C compiler sees the header."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <pixload.h>", "int main(void) {"]
    expected = {}
    for name in STRUCTS:
        struct = getattr(_ffi, name)
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        expected[name] = ctypes.sizeof(struct)
        for field, _ in struct._fields_:
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
            expected[f"{name}.{field}"] = getattr(struct, field).offset
    lines.append("return 0; }")
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines))
    subprocess.run(["gcc", "-std=c11", "-I", str(ROOT / "include"), str(source), "-o", str(tmp_path / "layout")],
                   check=True)
    out = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout
    actual = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
    assert actual == expected


def run_python(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def test_missing_library_says_what_to_do():
    run = run_python("import pixload", PIXLOAD_LIBRARY="/nonexistent/libpixload.so.0")
    assert run.returncode != 0
    assert "ImportError" in run.stderr or "LibraryNotFoundError" in run.stderr
    assert "make install" in run.stderr and "PIXLOAD_LIBRARY" in run.stderr
    assert "/nonexistent/libpixload.so.0" in run.stderr


def test_not_a_pixload_library_is_refused():
    libc = ctypes.util.find_library("c")
    run = run_python("import pixload", PIXLOAD_LIBRARY=libc)
    assert run.returncode != 0 and "not libpixload" in run.stderr


def test_library_next_to_the_package_is_found(tmp_path):
    """A copy in the package directory is used when PIXLOAD_LIBRARY is unset."""
    package = tmp_path / "pixload"
    shutil.copytree(os.path.dirname(pixload.__file__), package,
                    ignore=shutil.ignore_patterns("__pycache__", "libpixload.so*"))
    shutil.copy(os.path.realpath(_ffi.lib._name), package / "libpixload.so.0")
    env = {k: v for k, v in os.environ.items() if k != "PIXLOAD_LIBRARY"}
    run = subprocess.run([sys.executable, "-c", "import pixload; print(pixload.library_origin)"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("next to the package: " + str(package))
