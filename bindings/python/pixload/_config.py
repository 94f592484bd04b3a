"""A Loader's keyword arguments made into a pxl_config, and its log callback."""
from . import _ffi
from ._enums import LogLevel, Scheme
from ._strings import _encode, _header_array

# "log" is a Python callable here, and log_user_data is the bindings' own business.
_CONFIG_FIELDS = {name for name, _ in _ffi.pxl_config._fields_} - {"struct_size", "log_user_data", "request_hook",
                                                                     "request_hook_user_data"}


def _as_tls_version(value):
    """tls_min_version: "1.2" / "1.3" (or 1.2, 1.3), or the header's number (12, 13)."""
    names = {"1.2": 12, "1.3": 13}
    if isinstance(value, float):
        value = f"{value:.1f}"
    if isinstance(value, str):
        if value not in names:
            raise ValueError(f"tls_min_version must be '1.2' or '1.3', not {value!r}")
        return names[value]
    return int(value)


ISOLATION_NONE, ISOLATION_MODULES, ISOLATION_ALL, ISOLATION_REQUIRED = 1, 0, 2, 0x100


def _as_isolation(value):
    """isolation: "modules" (default), "none", "all" (the built-in formats too), each
    optionally with "+required" ("modules+required"); or the header's number."""
    if isinstance(value, str):
        names = {"modules": ISOLATION_MODULES, "none": ISOLATION_NONE, "all": ISOLATION_ALL}
        base, _, extra = value.partition("+")
        if base not in names or extra not in ("", "required"):
            raise ValueError(f"isolation must be 'none', 'modules' or 'all' (optionally '+required'), not {value!r}")
        return names[base] | (ISOLATION_REQUIRED if extra else 0)
    return int(value)


def _as_schemes(value):
    if isinstance(value, int):
        return int(value)
    bits = 0
    for name in value:
        bits |= Scheme[name.upper()]
    return int(bits)


def _as_log_level(value):
    if isinstance(value, str):
        try:
            return LogLevel[value.upper()]
        except KeyError:
            raise ValueError(f"unknown log level {value!r}; 'error', 'warning' or 'info'") from None
    return int(value)


def _log_trampoline(log):
    """A pxl_log_callback calling log(level, message). It runs on the library's threads:
    nothing it raises may reach C, so exceptions are swallowed (a logger that fails must
    not take the loader down)."""
    def on_log(level, message, _user_data):
        try:
            try:
                level = LogLevel(level)
            except ValueError:  # a level newer than these bindings: keep the number
                pass
            log(level, message.decode("utf-8", "replace") if message else "")
        except BaseException:  # noqa: B902 -- must not unwind into C
            pass
    return _ffi.log_callback(on_log)


def _fill_config(cfg, config, keep):
    """Sets the pxl_config fields that config (Loader's keyword arguments, names checked)
    gives; every byte string they point to is appended to keep, which the caller holds
    until pxl_loader_new has returned."""
    for name, value in config.items():
        if value is None:
            continue
        if name == "log_level":
            value = _as_log_level(value)
        elif name == "allowed_schemes":
            value = _as_schemes(value)
        elif name == "headers":
            value = _header_array(value, keep)
        elif name == "tls_min_version":
            value = _as_tls_version(value)
        elif name == "isolation":
            value = _as_isolation(value)
        elif name in ("user_agent", "ca_file", "ca_path", "proxy", "disk_cache_dir", "codec_modules"):
            value = _encode(value)
            keep.append(value)
        setattr(cfg, name, value)
