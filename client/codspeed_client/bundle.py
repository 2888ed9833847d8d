"""A shard's bundle: the profile folder as a tar.gz whose members sit under ``./``.

Each bundle carries the CRC32 that S3 checks the upload against (``x-amz-checksum-crc32``,
signed into the upload URL), and is checked with the aggregator's own rules
(``codspeed_rules``) while it uploads. tarfile and the rules are imported where a folder is
packed or an archive checked: the start-up of a push does without them."""

from __future__ import annotations

import base64
import hashlib
import json
import mmap
import os
import threading
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

from .errors import INPUT, ClientError

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from codspeed_rules.bundle import BundleSummary
    from codspeed_rules.normalize import Normalizer, Writable

CARRIED_METADATA = "metadata.json"  # a profile folder may carry its CodSpeed metadata here


class Bundle:
    def __init__(
        self,
        path: Path,
        size: int,
        crc32: Callable[[], str],
        files: list[str],
        carried_metadata: dict[str, Any] | None = None,
        executor: str = "valgrind",
        *,
        md5: Callable[[], str],
    ) -> None:
        self.path = path
        self.size = size
        self.crc32 = crc32  # S3's form: base64 of the big-endian CRC32; it may still be being taken
        # base64 of the raw MD5, CodSpeed's profileMd5 (and S3's Content-MD5): taken with the CRC32
        self.md5 = md5
        self.files = files
        self.carried_metadata = carried_metadata
        self.executor = executor


class Verdict:
    """The aggregator's rules applied to a bundle on a thread of its own, so that the check and
    the upload overlap: a bad bundle is found at the push, not when the aggregator refuses it."""

    def __init__(self, path: Path, executor: str, shown: str | None = None) -> None:
        self.path, self.executor, self.shown = path, executor, shown or str(path)  # shown: what messages call it
        self.reason: str | None = None
        self.summary: BundleSummary | None = None
        self._thread = threading.Thread(target=self._check, name="bundle-check", daemon=True)
        self._thread.start()

    def _check(self) -> None:
        from codspeed_rules.bundle import validate_bundle
        from codspeed_rules.tar import BadBundle

        try:
            with open(self.path, "rb") as stream:
                self.summary = validate_bundle(stream, self.executor)
        except BadBundle as exc:
            self.reason = str(exc)
        except OSError as exc:
            self.reason = f"cannot be read ({exc.strerror or exc})"

    def guard(self, body: BinaryIO) -> _Guarded:
        """``body`` read as the upload reads it, stopped as soon as the check has failed."""
        return _Guarded(body, self)

    def result(self) -> BundleSummary:
        """The bundle's summary, once checked; ClientError (exit 7) naming the problem otherwise."""
        self._thread.join()
        if self.reason is not None or self.summary is None:
            raise ClientError(f"{self.shown} would be refused by the aggregator: {self.reason}", INPUT)
        return self.summary


class _Guarded:
    def __init__(self, body: BinaryIO, verdict: Verdict) -> None:
        self._body, self._verdict = body, verdict

    def __len__(self) -> int:
        return os.fstat(self._body.fileno()).st_size

    def read(self, n: int = -1) -> bytes:
        if self._verdict.reason is not None:
            self._verdict.result()  # raises, naming the problem: the upload stops
        read: bytes = self._body.read(n)
        return read


def s3_crc32(value: int) -> str:
    return base64.b64encode(value.to_bytes(4, "big")).decode()


def _members(folder: Path, files: list[str]) -> list[str]:
    """What the runner's tar of the folder holds, in its order: the folder itself (``.``), then each
    folder's entries by name, a subfolder's own entry before what it holds."""
    folders = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_dir()]  # empty ones too
    return ["."] + sorted([*files, *folders], key=lambda name: Path(name).parts)


def _profile_folder(folder: Path) -> Path:
    """The folder the profiles are in, refused when it is none. One given as a link is followed, as
    the runner's tar follows the path it is given (its root entry was the link itself, refused);
    links inside it stay what they are, and refused (the hostile-bundle rules)."""
    if folder.is_file():
        raise ClientError(
            f"profile folder {folder} is a file: pass the folder CodSpeed wrote the profiles to "
            "(an archive goes with push --archive)",
            INPUT,
        )
    if not folder.is_dir():
        raise ClientError(
            f"profile folder {folder} does not exist: pass the folder CodSpeed wrote the profiles to", INPUT
        )
    return folder.resolve()


def _carried_metadata(folder: Path) -> Any:
    """The metadata a runner left in the folder, when it did (``CARRIED_METADATA``)."""
    if not (folder / CARRIED_METADATA).is_file():
        return None
    try:
        return json.loads((folder / CARRIED_METADATA).read_text())
    except ValueError as exc:
        raise ClientError(f"{folder / CARRIED_METADATA} is not JSON ({exc})", INPUT) from exc


def _check_valgrind_profiles(folder: Path, files: list[str]) -> None:
    from codspeed_rules.callgrind import OUT_NAME

    if not any(OUT_NAME.match(f) or f.endswith(".tgtrace") for f in files):
        raise ClientError(
            f"profile folder {folder} holds no <pid>.out file: run the benchmarks under CodSpeed's instrumentation "
            "first",
            INPUT,
        )


def from_folder(folder: Path, executor: str | None = None) -> Bundle:
    import tempfile

    from codspeed_rules.bundle import executor_of

    folder = _profile_folder(folder)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != CARRIED_METADATA)
    executor = executor or executor_of(files)
    if executor == "valgrind":
        _check_valgrind_profiles(folder, files)
    carried = _carried_metadata(folder)
    handle = tempfile.NamedTemporaryFile(prefix="codspeed-shard-", suffix=".tar.gz", delete=False)
    checksummed = _ChecksummedFile(handle)
    try:
        with handle:
            _write_normalized(folder, files, checksummed)
    except OSError as exc:
        Path(handle.name).unlink(missing_ok=True)
        raise ClientError(
            f"cannot read {exc.filename or folder} ({exc.strerror or exc}): "
            "every file of the profile folder must be readable",
            INPUT,
        ) from exc
    path = Path(handle.name)
    crc32, md5 = s3_crc32(checksummed.crc), base64.b64encode(checksummed.md5.digest()).decode()
    return Bundle(
        path=path,
        size=path.stat().st_size,
        crc32=lambda: crc32,
        md5=lambda: md5,
        files=files,
        carried_metadata=carried,
        executor=executor,
    )


def _write_normalized(folder: Path, files: list[str], sink: _ChecksummedFile) -> None:
    """A normalized bundle of the folder (cut at every member): the aggregator's merge copies it as it is."""
    import tarfile

    from codspeed_rules.normalize import Normalizer

    normalizer = Normalizer(sink, level=6)
    feeding = _Feeding(normalizer)  # a stream ("w|") only writes: typeshed wants a whole file
    with tarfile.open(fileobj=feeding, mode="w|", format=tarfile.GNU_FORMAT) as tar:  # type: ignore[call-overload]  # a stream
        for name in _members(folder, files):
            tar.add(folder / name, arcname="." if name == "." else f"./{name}", recursive=False)
    normalizer.close()


class _Feeding:
    """The tar's bytes, as ``tarfile`` writes them, fed to the normalizer."""

    def __init__(self, normalizer: Normalizer) -> None:
        self._normalizer = normalizer

    def write(self, data: bytes) -> int:
        self._normalizer.feed(bytes(data))
        return len(data)


class _ChecksummedFile:
    """Takes the archive's CRC32 and MD5 as it is written: no second pass over it."""

    def __init__(self, raw: Writable) -> None:
        self._raw = raw
        self.crc = 0
        self.md5 = hashlib.md5()

    def write(self, data: bytes) -> int:
        self.crc = zlib.crc32(data, self.crc)
        self.md5.update(data)
        self._raw.write(data)
        return len(data)


def _checksums_meanwhile(path: Path) -> tuple[Callable[[], str], Callable[[], str]]:
    """The file's CRC32 and MD5, taken on another thread while the HTTP client loads (a call each
    over a memory map, so the thread never waits for the interpreter lock)."""
    found: dict[str, str] = {}

    def take() -> None:
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                found["crc32"] = s3_crc32(zlib.crc32(mapped))
                found["md5"] = base64.b64encode(hashlib.md5(mapped).digest()).decode()
        except (OSError, ValueError) as exc:  # ValueError: the file was emptied meanwhile
            found["error"] = str(exc)

    thread = threading.Thread(target=take, name="checksums", daemon=True)
    thread.start()

    def result(name: str) -> str:
        thread.join()
        if "error" in found:
            raise ClientError(f"cannot read archive {path} ({found['error']})", INPUT)
        return found[name]

    return partial(result, "crc32"), partial(result, "md5")


def from_archive(archive: Path, executor: str = "valgrind") -> Bundle:
    """An already made archive (a tar, gzip-compressed or plain)."""
    if archive.is_dir():
        raise ClientError(f"{archive} is a folder: pass it as --profile-folder, or an archive as --archive", INPUT)
    if not archive.is_file():
        raise ClientError(f"archive {archive} does not exist", INPUT)
    try:
        with open(archive, "rb") as f:
            f.read(1)
    except OSError as exc:
        raise ClientError(f"cannot read archive {archive} ({exc.strerror or exc})", INPUT) from exc
    crc32, md5 = _checksums_meanwhile(archive)
    return Bundle(path=archive, size=archive.stat().st_size, crc32=crc32, md5=md5, files=[], executor=executor)
