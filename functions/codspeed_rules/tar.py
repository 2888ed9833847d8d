"""Reading a tar the way a bundle's check needs it: a member's path kept inside the profile folder,
an extended header's size checked before ``tarfile`` reads it, a stream read or written front
to back; and the error every refused bundle raises."""

from __future__ import annotations

import tarfile
from typing import Any, Protocol


class Readable(Protocol):
    """What a bundle is read from: a file, an S3 body, a stream being unpacked."""

    def read(self, n: int = -1, /) -> bytes: ...


class BadBundle(Exception):
    """A bundle that failed validation; the message is the reason shown in the report."""


MAX_HEADER_BYTES = 64 * 1024  # a PAX header or GNU long name; real ones are a few hundred bytes
_EXTENDED = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)
# Anything a hostile archive makes the decoder raise: it is a bad bundle, not a failed invocation.
DECODING_ERRORS = (tarfile.TarError, ValueError, OverflowError, UnicodeError, MemoryError, EOFError)


class BoundedTarInfo(tarfile.TarInfo):
    """``tarfile`` reads a whole PAX header or GNU long name into memory before anything counts
    it (a 100 MiB header in a 102 KB bundle): its size is checked first, and sparse members,
    which the merge could not write back, are refused."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED and self.size > MAX_HEADER_BYTES:
            raise BadBundle(
                f"a tar extended header (PAX or GNU long name) of {self.size} bytes is over the "
                f"{MAX_HEADER_BYTES // 1024} KiB limit"
            )
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise BadBundle(f"member {self.name!r} is a sparse file: only regular files and folders are accepted")
        # tarfile's own hook, private (no public one exists): the one place a header's size is known before it is read
        member: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]  # private, so not in typeshed
        return member


CHUNK = 1 << 20


def member_path(name: str) -> str:
    """The member's path inside the profile folder, or BadBundle when it could escape it."""
    if not name or "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise BadBundle(f"member name {name!r} has a backslash or control character")
    if name.startswith("/"):
        raise BadBundle(f"member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BadBundle(f"member {name!r} points outside the profile folder")
    return "/".join(parts)


def read_exactly(raw: Readable, n: int) -> bytes:
    """``n`` bytes, fewer only at the end: a stream may answer a read with less than asked."""
    data = raw.read(n)
    while len(data) < n and (more := raw.read(n - len(data))):
        data += more
    return data


class CountingReader:
    """Counts the compressed bytes read and the bytes they unpacked to, for the ratio limit."""

    def __init__(self, raw: Readable) -> None:
        self._raw = raw
        self._pushed = b""
        self.count = 0
        self.unpacked = 0

    def peek(self, n: int) -> bytes:
        self._pushed = read_exactly(self._raw, n)
        return self._pushed

    def read(self, n: int = -1) -> bytes:
        pushed, self._pushed = self._pushed, b""
        data = pushed + self._raw.read(n if n < 0 else max(n - len(pushed), 0))
        self.count += len(data)
        return data


class ForwardOnly:
    """A stream read, or written, front to back, that ``tarfile`` may open as a file (modes "r:"
    and "w:"): those read a member into, and write it from, the caller's chunks as they are,
    where its stream modes ("r|", "w|") join and slice every chunk through a buffer of their own
    (three copies of each byte). It seeks only forward, reading what it skips."""

    def __init__(self, raw: Any) -> None:  # read from (mode "r:"), or written to (mode "w:")
        self._raw, self._at = raw, 0

    def read(self, n: int = -1) -> bytes:
        data = read_exactly(self._raw, n)  # tarfile takes a short read for the end (a verifier answers piece by piece)
        self._at += len(data)
        return data

    def write(self, data: bytes) -> int:
        self._at += len(data)
        written: int = self._raw.write(data)
        return written

    def tell(self) -> int:
        return self._at

    def close(self) -> None:
        """Nothing: tarfile closes no file it was given, though its protocol names close()."""

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0 or offset < self._at:
            raise tarfile.StreamError("seeking backwards is not allowed")
        while self._at < offset and self.read(min(CHUNK, offset - self._at)):
            pass
        return self._at
