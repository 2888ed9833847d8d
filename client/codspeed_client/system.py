"""The machine a shard ran on, as CodSpeed's runner describes it in ``runner`` (os, osVersion,
arch, host, user, cpuBrand, cpuName, cpuVendorId, cpuCores, totalMemoryGb, cpuFlags), from the
standard library and, on Linux, ``/etc/os-release``, ``/proc/cpuinfo`` and ``/proc/meminfo``.
What a system does not tell is left out; nothing here raises."""

from __future__ import annotations

import os
import platform

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return ""


def _fields(text: str, separator: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(separator)
        if sep and key.strip() not in found:
            found[key.strip()] = value.strip().strip('"')
    return found


def machine(root: str = "/") -> dict[str, Any]:
    """The runner's machine fields for this host (``root``: where /etc and /proc are, for tests)."""
    system = platform.system()
    info: dict[str, Any] = {}
    if system == "Linux":
        release = _fields(_read(os.path.join(root, "etc/os-release")), "=")
        info["os"], info["osVersion"] = release.get("ID") or "linux", release.get("VERSION_ID") or platform.release()
    elif system == "Darwin":
        info["os"], info["osVersion"] = "macos", platform.mac_ver()[0] or platform.release()
    elif system:
        info["os"], info["osVersion"] = system.lower(), platform.version() or platform.release()
    info["arch"] = platform.machine() or None
    info["host"] = platform.node() or None
    info["user"] = os.environ.get("USER") or os.environ.get("USERNAME") or None
    cpu = _fields(_read(os.path.join(root, "proc/cpuinfo")), ":")
    brand = cpu.get("model name") or cpu.get("Model") or platform.processor() or None
    info.update(
        {
            "cpuBrand": brand,
            "cpuName": "cpu0" if cpu else None,
            "cpuVendorId": cpu.get("vendor_id") or cpu.get("CPU implementer"),
            "cpuCores": os.cpu_count(),
        }
    )
    kilobytes = _fields(_read(os.path.join(root, "proc/meminfo")), ":").get("MemTotal", "").removesuffix("kB").strip()
    if kilobytes.isdigit():
        info["totalMemoryGb"] = round(int(kilobytes) / (1 << 20))
    flags = cpu.get("flags") or cpu.get("Features")
    if flags:
        info["cpuFlags"] = sorted(set(flags.split()))
    return {k: v for k, v in info.items() if v is not None}
