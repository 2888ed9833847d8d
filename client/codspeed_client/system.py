"""The machine a shard ran on, as CodSpeed's runner describes it in ``runner`` (os, osVersion,
arch, host, user, cpuBrand, cpuName, cpuVendorId, cpuCores, totalMemoryGb, cpuFlags), from the
standard library and, on Linux, ``/etc/os-release``, ``/proc/cpuinfo`` and ``/proc/meminfo``.
What a system does not tell is left out, but the flags (``[]``, as the runner says it); nothing here
raises."""

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


def _processors(text: str) -> list[dict[str, str]]:
    """``/proc/cpuinfo``'s blocks, one a logical processor."""
    return [found for block in text.split("\n\n") if (found := _fields(block, ":"))]


def physical_cores(processors: list[dict[str, str]]) -> int | None:
    """The physical cores, as the runner's sysinfo counts them on Linux: the distinct (core id, physical
    id) pairs, a processor with neither (a Raspberry Pi, most aarch64 hosts) a core of its own."""
    cores = {
        f"{p['core id']} {p['physical id']}" if p.get("core id") and p.get("physical id") else p.get("processor", "")
        for p in processors
    }
    return len(cores) or None


def machine(root: str = "/") -> dict[str, Any]:
    """The runner's machine fields for this host (``root``: where /etc and /proc are, for tests), computed
    as its ``SystemInfo::new`` computes them (src/system/info.rs): physical cores, memory rounded up to
    the GiB, the first processor's flags sorted as they are (``[]`` when unreadable), ``unknown`` for a
    brand the CPU does not say."""
    info: dict[str, Any] = {
        **_os(root),
        "arch": platform.machine() or None,
        "host": platform.node() or None,
        "user": _user(),
    }
    processors = _processors(_read(os.path.join(root, "proc/cpuinfo")))
    info.update(_cpu(processors))
    kilobytes = _fields(_read(os.path.join(root, "proc/meminfo")), ":").get("MemTotal", "").removesuffix("kB").strip()
    if kilobytes.isdigit():
        info["totalMemoryGb"] = -(-int(kilobytes) // (1 << 20))  # sysinfo's bytes, div_ceil a GiB
    info["cpuFlags"] = info.pop("cpuFlags")  # the runner's order: its flags last
    return {k: v for k, v in info.items() if v is not None}


def _user() -> str:
    """The account of the process's uid, as ``whoami`` says it (the runner runs it), whatever the environment
    says (a container job has no USER); the uid's number where it has no account (there the runner stops)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _os(root: str) -> dict[str, Any]:
    """The system's name and version, as sysinfo names them (/etc/os-release's ID on Linux)."""
    system = platform.system()
    if system == "Linux":
        release = _fields(_read(os.path.join(root, "etc/os-release")), "=")
        return {"os": release.get("ID") or "linux", "osVersion": release.get("VERSION_ID") or platform.release()}
    if system == "Darwin":
        return {"os": "macos", "osVersion": platform.mac_ver()[0] or platform.release()}
    return {"os": system.lower(), "osVersion": platform.version() or platform.release()} if system else {}


def _cpu(processors: list[dict[str, str]]) -> dict[str, Any]:
    """The first processor, as the runner takes it, and the physical cores."""
    cpu = processors[0] if processors else {}
    return {
        "cpuBrand": cpu.get("model name") or cpu.get("Model") or platform.processor() or "unknown",
        "cpuName": "cpu0",  # sysinfo's name of the first CPU, which the runner takes
        "cpuVendorId": cpu.get("vendor_id") or cpu.get("CPU implementer"),
        # off Linux (no /proc/cpuinfo here) the logical count: sysinfo asks the kernel for the physical one
        "cpuCores": physical_cores(processors) or os.cpu_count(),
        # "flags" on x86_64, "Features" on aarch64, split, sorted, duplicates kept; [] elsewhere or unreadable
        "cpuFlags": sorted((cpu.get("flags") or cpu.get("Features") or "").split()),
    }
