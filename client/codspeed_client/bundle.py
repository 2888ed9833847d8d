"""A shard's bundle: the profile folder as a tar.gz whose members sit under ``./``."""

import base64
import hashlib
import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import INPUT, ClientError

CARRIED_METADATA = "metadata.json"  # a profile folder may carry its CodSpeed metadata here


@dataclass
class Bundle:
    path: Path
    size: int
    md5: str  # base64 of the raw MD5
    files: list[str]
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
    with handle, tarfile.open(fileobj=handle, mode="w:gz") as tar:
        for name in files:
            tar.add(folder / name, arcname=f"./{name}", recursive=False)
    path = Path(handle.name)
    return Bundle(path=path, size=path.stat().st_size, md5=md5_of(path), files=files, carried_metadata=carried)


def from_archive(archive: Path) -> Bundle:
    if not archive.is_file():
        raise ClientError(f"archive {archive} does not exist", INPUT)
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            files = [m.name.removeprefix("./") for m in tar.getmembers() if m.isfile()]
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ClientError(f"archive {archive} is not a readable tar.gz ({exc})", INPUT) from exc
    if not files:
        raise ClientError(f"archive {archive} is empty", INPUT)
    return Bundle(path=archive, size=archive.stat().st_size, md5=md5_of(archive), files=files)
