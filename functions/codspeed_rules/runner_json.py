"""CodSpeed's upload metadata as its runner writes it, and as both sides read it: the field order,
serde_json's compact bytes, one reading of a body (no key twice), and the runPartId of a shard
pushed by codspeed-client, which the client writes and the aggregator checks with this one function."""

from __future__ import annotations

import json

TYPE_CHECKING = False  # the client imports this: typing costs every command 3 ms at start-up
if TYPE_CHECKING:
    from typing import Any

RUNNER_ORDER = (  # the runner's own field order (src/upload/interfaces.rs)
    "repositoryProvider",
    "version",
    "tokenless",
    "profileMd5",
    "profileEncoding",
    "runner",
    "runEnvironment",
    "runPart",
    "commitHash",
    "allowEmpty",
    "ref",
    "headRef",
    "baseRef",
    "owner",
    "repository",
    "event",
    "sender",
    "ghData",
    "glData",
    "localData",
    "repositoryRootPath",
)

# the jobName of the aggregator's own parts, and the first word of a pushed shard's runPartId
AGGREGATOR_JOB = "codspeed-shard-aggregator"


def in_runner_order(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata with its fields in the runner's order; fields the runner does not send last, as they came."""
    return {
        **{k: metadata[k] for k in RUNNER_ORDER if k in metadata},
        **{k: v for k, v in metadata.items() if k not in RUNNER_ORDER},
    }


def compact(value: Any) -> bytes:
    """serde_json's compact form, as the runner writes its POST body: no spaces, non-ASCII as it is,
    the same escapes for quotes, backslashes and control characters, keys in the order given."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class DuplicateKey(ValueError):
    """A JSON object names one key twice: readers disagree on which value it means."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} appears twice in one object")
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = value
    return found


class NotSerdeJson(ValueError):
    """JSON that Python's reader takes and serde_json (the runner's, and CodSpeed's) refuses, or
    reads as another type: what it is, and where (a path from the top, ``metadata.runner.note``)."""


class _Refused:
    """A value ``read`` found and refuses, kept in place until the walk says where it is."""

    def __init__(self, why: str) -> None:
        self.why = why


U64_MAX, I64_MIN = 2**64 - 1, -(2**63)


def _constant(token: str) -> _Refused:
    # serde_json's grammar is RFC 8259's: NaN, Infinity and -Infinity are no JSON tokens
    return _Refused(f"{token}, which is no JSON value (serde_json refuses it): send a finite number or null")


U64_DIGITS = 20  # 18446744073709551615


def _float(text: str) -> float | _Refused:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # serde_json: "number out of range" past f64's
        return _Refused(f"the number {text[:40]}, past a 64-bit float's range (serde_json refuses it)")
    return value


def _int(text: str) -> int | float | _Refused:
    if len(text.lstrip("-")) <= U64_DIGITS:  # longer is past u64 (and past 4300 digits, int() would refuse it)
        value = int(text)
        if I64_MIN <= value <= U64_MAX:
            return value
    return _float(text)  # serde_json reads an integer past u64 (or i64, below 0) as a float: so is it here


def read(body: bytes | str) -> Any:
    """A JSON body read one way only, as serde_json reads it into a value: an object naming a key
    twice raises ``DuplicateKey`` (serde's derived readers refuse it; Python's ``json`` keeps the
    last value, others the first); ``NaN``, ``Infinity`` and ``-Infinity`` (no JSON tokens), a number
    past f64's range such as ``1e999``, and a lone surrogate escape (``"\\udc80"``, no Unicode
    scalar) raise ``NotSerdeJson``; an integer past u64 is a float, as serde_json reads it."""
    value = json.loads(body, object_pairs_hook=_unique, parse_constant=_constant, parse_float=_float, parse_int=_int)
    _walk(value, "")
    return value


def _walk(value: Any, at: str) -> None:
    where = at or "the top"
    if isinstance(value, _Refused):
        raise NotSerdeJson(f"{where}: {value.why}")
    if isinstance(value, str):
        _scalar(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _scalar(key, f"a key of {where}")
            _walk(item, f"{at}.{key}" if at else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{at}[{index}]")


def _scalar(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise NotSerdeJson(
            f"{where}: a lone surrogate escape (\\u{code:04x}), no Unicode character: serde_json refuses it"
        ) from None


def same(one: Any, other: Any) -> bool:
    """Equal type for type, as serde_json's values compare: ``10`` is not ``10.0``, ``1`` not ``true``,
    ``0.0`` not ``-0.0``; Python's ``==`` says all of these are equal."""
    if type(one) is not type(other):
        return False
    if isinstance(one, dict):
        return one.keys() == other.keys() and all(same(v, other[k]) for k, v in one.items())
    if isinstance(one, list):
        return len(one) == len(other) and all(same(a, b) for a, b in zip(one, other, strict=True))
    if isinstance(one, float):
        return repr(one) == repr(other)
    return bool(one == other)


def runner_part_id(job: str, suffix: dict[str, Any]) -> str:
    """A runPartId in the runner's form: the job, then a JSON object (``-{"executor":…}``)."""
    return f"{job}-{json.dumps(suffix, separators=(',', ':'))}"


def pushed_part_id(name: str, executor: str) -> str:
    """The runPartId of a shard pushed by codspeed-client: one per name and executor, so two executors'
    shard 1 are two parts (CodSpeed keeps the last upload of a runPartId). Its first key,
    ``aggregated-shard``, is refused in any runner's runPartId, so no runner job's part equals one."""
    return runner_part_id(AGGREGATOR_JOB, {"aggregated-shard": name, "executor": executor})
