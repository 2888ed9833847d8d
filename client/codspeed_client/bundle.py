"""A shard's bundle: the profile folder as a tar.gz whose members sit under ``./``.

Each bundle carries the CRC32 that S3 checks the upload against (``x-amz-checksum-crc32``,
signed into the upload URL). tarfile and the callgrind scanner are imported where a folder
is packed or an archive inspected: pushing a ready archive does without them."""

import base64
import json
import mmap
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

from .errors import INPUT, ClientError

CARRIED_METADATA = "metadata.json"  # a profile folder may carry its CodSpeed metadata here


class Bundle:
    def __init__(self, path: Path, size: int, crc32: Callable[[], str], files: list[str], benchmarks: int = 0,
                 carried_metadata: dict | None = None) -> None:
        self.path = path
        self.size = size
        self.crc32 = crc32  # S3's form: base64 of the big-endian CRC32; it may still be being taken
        self.files = files
        self.benchmarks = benchmarks
        self.carried_metadata = carried_metadata


def s3_crc32(value: int) -> str:
    return base64.b64encode(value.to_bytes(4, "big")).decode()


def from_folder(folder: Path) -> Bundle:
    import tarfile
    import tempfile

    from codspeed_rules.callgrind import OUT_NAME

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
    checksummed = _ChecksummedFile(handle)
    with handle, tarfile.open(fileobj=checksummed, mode="w:gz", compresslevel=6) as tar:
        for name in files:
            tar.add(folder / name, arcname=f"./{name}", recursive=False)
    path = Path(handle.name)
    benchmarks = sum(_count(open(folder / name, "rb")) for name in files if OUT_NAME.match(name))
    crc32 = s3_crc32(checksummed.crc)
    return Bundle(path=path, size=path.stat().st_size, crc32=lambda: crc32, files=files, benchmarks=benchmarks,
                  carried_metadata=carried)


class _ChecksummedFile:
    """Takes the archive's CRC32 as it is written: no second pass over it."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self.crc = 0

    def write(self, data: bytes) -> int:
        self.crc = zlib.crc32(data, self.crc)
        return self._raw.write(data)


def _count(stream) -> int:
    from codspeed_rules.callgrind import BenchmarkScanner

    scanner = BenchmarkScanner(keep_names=0)
    with stream:
        while chunk := stream.read(1 << 20):
            scanner.feed(chunk)
    return scanner.count


def _crc32_meanwhile(path: Path) -> Callable[[], str]:
    """The file's CRC32, taken on another thread while the HTTP client loads (one call over a
    memory map, so the thread never waits for the interpreter lock): 35 ms per 100 MB here."""
    found: dict[str, str | OSError | ValueError] = {}

    def take() -> None:
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                found["crc32"] = s3_crc32(zlib.crc32(mapped))
        except (OSError, ValueError) as exc:  # ValueError: the file was emptied meanwhile
            found["error"] = exc

    thread = threading.Thread(target=take, name="crc32", daemon=True)
    thread.start()

    def result() -> str:
        thread.join()
        if "error" in found:
            raise ClientError(f"cannot read archive {path} ({found['error']})", INPUT)
        return found["crc32"]

    return result


def from_archive(archive: Path, inspect: bool = False) -> Bundle:
    """An already made archive. Only its gzip header is checked here (the aggregator validates
    the rest on arrival); ``inspect`` (a dry run) also lists its files and counts its benchmarks."""
    if not archive.is_file():
        raise ClientError(f"archive {archive} does not exist", INPUT)
    with open(archive, "rb") as f:
        magic = f.read(2)
    if magic != b"\x1f\x8b":
        raise ClientError(f"archive {archive} is not a tar.gz (no gzip header): make it with tar -czf from the profile folder", INPUT)
    crc32 = _crc32_meanwhile(archive)
    files, benchmarks = [], 0
    if inspect:
        import tarfile

        from codspeed_rules.callgrind import OUT_NAME

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
    return Bundle(path=archive, size=archive.stat().st_size, crc32=crc32, files=files, benchmarks=benchmarks)
