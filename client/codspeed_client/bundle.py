"""A shard's bundle: the profile folder as a tar.gz whose members sit under ``./``."""

import base64
import hashlib
import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import INPUT, ClientError

from codspeed_wire.callgrind import OUT_NAME, BenchmarkScanner

CARRIED_METADATA = "metadata.json"  # a profile folder may carry its CodSpeed metadata here


@dataclass
class Bundle:
    path: Path
    size: int
    md5: str  # base64 of the raw MD5
    files: list[str]
    benchmarks: int = 0
    carried_metadata: dict | None = None


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return base64.b64encode(digest.digest()).decode()


def from_folder(folder: Path) -> Bundle:
    if not folder.is_dir():
        raise ClientError(f"profile folder {folder} does not exist: pass the folder CodSpeed wrote the profiles to", INPUT)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != CARRIED_METADATA)
    if not any(f.endswith(".out") and "/" not in f for f in files):
        raise ClientError(
            f"profile folder {folder} holds no <pid>.out file: run the benchmarks under CodSpeed's instrumentation first",
            INPUT,
        )
    carried = None
    if (folder / CARRIED_METADATA).is_file():
        try:
            carried = json.loads((folder / CARRIED_METADATA).read_text())
        except ValueError as exc:
            raise ClientError(f"{folder / CARRIED_METADATA} is not JSON ({exc})", INPUT) from exc
    handle = tempfile.NamedTemporaryFile(prefix="codspeed-shard-", suffix=".tar.gz", delete=False)
    hashing = _HashingFile(handle)
    with handle, tarfile.open(fileobj=hashing, mode="w:gz", compresslevel=6) as tar:
        for name in files:
            tar.add(folder / name, arcname=f"./{name}", recursive=False)
    path = Path(handle.name)
    benchmarks = sum(_count(open(folder / name, "rb")) for name in files if OUT_NAME.match(name))
    return Bundle(path=path, size=path.stat().st_size, md5=hashing.md5(), files=files, benchmarks=benchmarks,
                  carried_metadata=carried)


class _HashingFile:
    """Takes the archive's MD5 as it is written: no second pass over it."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self._md5 = hashlib.md5()

    def write(self, data: bytes) -> int:
        self._md5.update(data)
        return self._raw.write(data)

    def md5(self) -> str:
        return base64.b64encode(self._md5.digest()).decode()


def _count(stream) -> int:
    scanner = BenchmarkScanner(keep_names=0)
    with stream:
        while chunk := stream.read(1 << 20):
            scanner.feed(chunk)
    return scanner.count


def from_archive(archive: Path, inspect: bool = False) -> Bundle:
    """An already made archive. Only its gzip header is checked here (the aggregator validates
    the rest on arrival); ``inspect`` also lists its files and counts its benchmarks."""
    if not archive.is_file():
        raise ClientError(f"archive {archive} does not exist", INPUT)
    with open(archive, "rb") as f:
        magic = f.read(2)
    if magic != b"\x1f\x8b":
        raise ClientError(f"archive {archive} is not a tar.gz (no gzip header): make it with tar -czf from the profile folder", INPUT)
    files, benchmarks = [], 0
    if inspect:
        try:
            with tarfile.open(archive, mode="r|gz") as tar:
                for member in tar:
                    if member.isfile():
                        name = member.name.removeprefix("./")
                        files.append(name)
                        if OUT_NAME.match(name):
                            benchmarks += _count(tar.extractfile(member))
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ClientError(f"archive {archive} is not a readable tar.gz ({exc}): make it with tar -czf from the profile folder", INPUT) from exc
        if not files:
            raise ClientError(f"archive {archive} is empty", INPUT)
    return Bundle(path=archive, size=archive.stat().st_size, md5=md5_of(archive), files=files, benchmarks=benchmarks)
