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
    assert (loaded >> 16, (loaded >> 8) & 0xFF) == (major, minor) and _ffi.version_compatible(loaded)
    assert pixload.version() == f"{loaded >> 16}.{(loaded >> 8) & 0xFF}.{loaded & 0xFF}"
    header_string = re.search(r'#define PXL_VERSION_STRING "([^"]+)"', (ROOT / "include/pixload.h").read_text())
    assert header_string.group(1) == f"{major}.{minor}.{patch}"


def test_only_the_same_minor_release_is_accepted():
    """Before 1.0 a minor release may change the ABI (0.2.0 reordered the table
    callbacks' parameters; 0.3.0 grew structs; 0.4.0 added the frame functions the
    bindings call; 0.5.0 the API of processors, fetchers, codecs and metrics; 0.6.0 a
    result source, FILE): 0.6.x only."""
    ok = [0x000600, 0x000601, 0x0006FF]
    refused = [0x000100, 0x000500, 0x0005FF, 0x000700, 0x010600, 0x000000]
    assert [_ffi.version_compatible(n) for n in ok] == [True] * len(ok)
    assert [_ffi.version_compatible(n) for n in refused] == [False] * len(refused)


def test_package_version_is_the_header_version():
    major, minor, patch = (header_macro(f"PXL_VERSION_{p}") for p in ("MAJOR", "MINOR", "PATCH"))
    assert pixload.__version__ == f"{major}.{minor}.{patch}"
    pyproject = (ROOT / "bindings/python/pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == pixload.__version__


def test_init_size_fills_exactly_our_struct():
    """The *_init_size functions get ctypes.sizeof: struct_size is ours, the defaults
    are where the header puts them, and nothing past our struct is written."""
    config = _ffi.init_struct(_ffi.pxl_config)
    assert config.struct_size == ctypes.sizeof(_ffi.pxl_config)
    assert config.log_level == _ffi.PXL_LOG_WARNING and not config.log and not config.log_user_data
    assert config.disk_cache_max_age_s == 604800 and config.memory_cache_bytes == 64 << 20
    request = _ffi.init_struct(_ffi.pxl_request)
    assert request.struct_size == ctypes.sizeof(_ffi.pxl_request) and request.progress_interval_ms == 100
    table = _ffi.init_struct(_ffi.pxl_table_config)
    assert table.struct_size == ctypes.sizeof(_ffi.pxl_table_config) and table.prefetch_priority == -100
    # Array elements (Loader.prefetch) are filled in place.
    array = (_ffi.pxl_request * 2)()
    _ffi.init_struct(_ffi.pxl_request, array[1])
    assert array[0].struct_size == 0 and array[1].struct_size == ctypes.sizeof(_ffi.pxl_request)


def test_log_level_constants_match_header():
    for name in ("ERROR", "WARNING", "INFO"):
        assert getattr(_ffi, f"PXL_LOG_{name}") == header_macro(f"PXL_LOG_{name}") == pixload.LogLevel[name]


def test_status_enum_matches_header():
    text = (ROOT / "include/pixload.h").read_text()
    in_header = {m.group(1): int(m.group(2)) for m in re.finditer(r"PXL_(OK|E_\w+) = (\d+)", text)}
    ours = {("OK" if s.name == "OK" else "E_" + s.name): int(s) for s in pixload.Status}
    assert ours == in_header
    assert pixload.status_string(pixload.Status.CANCELLED) == "cancelled"


STRUCTS = ["pxl_config", "pxl_request", "pxl_result", "pxl_stats", "pxl_table_config", "pxl_table_stats"]


SIZES_0_1 = {
    "PXL_CONFIG_SIZE_0_1": ("pxl_config", "disk_cache_max_age_s"),
    "PXL_REQUEST_SIZE_0_1": ("pxl_request", "progress_interval_ms"),
    "PXL_TABLE_CONFIG_SIZE_0_1": ("pxl_table_config", "prefetch_priority"),
    "PXL_STATS_SIZE_0_1": ("pxl_stats", "disk_bytes"),
    "PXL_TABLE_STATS_SIZE_0_1": ("pxl_table_stats", "failed"),
    "PXL_CONFIG_SIZE_0_2": ("pxl_config", "log_level"),
}


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
    # The 0.1.0 sizes (the smallest struct_size the library accepts): the prefix of our
    # structs up to those fields is 0.1.0's layout.
    for macro, (name, last) in SIZES_0_1.items():
        lines.append(f'printf("{macro} %zu\\n", (size_t)({macro}));')
        field = getattr(getattr(_ffi, name), last)
        expected[macro] = field.offset + field.size
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
