"""IAM's evaluation of an identity policy, for what the template's roles use: Allow and Deny
statements, actions and resources with wildcards, and condition operators on request keys.
An explicit deny wins; anything not allowed is denied (AWS's default)."""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

ALLOWED, DENIED, NOT_ALLOWED = "allowed", "denied", "not allowed"


@dataclass(frozen=True)
class Need:
    """One IAM action a call needs on one resource, with the request's condition keys."""

    action: str
    resource: str
    context: dict = field(default_factory=dict, compare=False, hash=False)


@cache  # the template's few globs, asked of every AWS call the suite makes
def _pattern(glob: str, ignore_case: bool = False) -> re.Pattern:
    """IAM wildcards: ``*`` any run of characters (``/``, ``:`` and line breaks too), ``?`` one
    character; matched against the whole value (``fullmatch``: ``$`` would take a trailing newline)."""
    body = re.escape(glob).replace(r"\*", ".*").replace(r"\?", ".")
    return re.compile(body, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _strings(expected: list, actual: str, like: bool, ignore_case: bool = False) -> bool:
    if like:
        return any(_pattern(str(e), ignore_case).fullmatch(actual) for e in expected)
    return any((str(e).lower() == actual.lower()) if ignore_case else str(e) == actual for e in expected)


# operator -> (matches(expected values, actual value), negated)
_OPERATORS = {
    "StringEquals": (lambda e, a: _strings(e, a, like=False), False),
    "StringNotEquals": (lambda e, a: _strings(e, a, like=False), True),
    "StringEqualsIgnoreCase": (lambda e, a: _strings(e, a, like=False, ignore_case=True), False),
    "StringNotEqualsIgnoreCase": (lambda e, a: _strings(e, a, like=False, ignore_case=True), True),
    "StringLike": (lambda e, a: _strings(e, a, like=True), False),
    "StringNotLike": (lambda e, a: _strings(e, a, like=True), True),
    "ArnEquals": (lambda e, a: _strings(e, a, like=False), False),
    "ArnNotEquals": (lambda e, a: _strings(e, a, like=False), True),
    "ArnLike": (lambda e, a: _strings(e, a, like=True), False),
    "ArnNotLike": (lambda e, a: _strings(e, a, like=True), True),
    "Bool": (lambda e, a: any(str(v).lower() == str(a).lower() for v in e), False),
}


class UnsupportedCondition(Exception):
    """A condition this evaluator does not know: it refuses to guess what AWS would answer."""


def _condition_holds(operator: str, key: str, expected, context: dict) -> bool:
    if operator == "Null":  # "true": the key must be absent
        present = key.lower() in {k.lower() for k in context}
        return all((not present) == (str(v).lower() == "true") for v in _listed(expected))
    matches, negated, if_exists = _operator(operator, key)
    context = {k.lower(): v for k, v in context.items()}  # IAM's condition key names ignore case
    key = key.lower()
    if key not in context:  # AWS: a key absent from the request matches only IfExists and negated operators
        return if_exists or negated
    hit = any(matches(_listed(expected), str(value)) for value in _listed(context[key]))
    return not hit if negated else hit


def _operator(operator: str, key: str) -> tuple[Callable[[list, str], bool], bool, bool]:
    """How a condition operator matches, whether it is negated, and whether it is an IfExists one."""
    if operator.startswith(("ForAnyValue:", "ForAllValues:")):  # multivalued keys: none in these policies
        raise UnsupportedCondition(f"condition operator {operator} on {key}")
    name, if_exists = (operator[:-8], True) if operator.endswith("IfExists") else (operator, False)
    if name not in _OPERATORS:
        raise UnsupportedCondition(f"condition operator {operator} on {key}")
    matches, negated = _OPERATORS[name]
    return matches, negated, if_exists


class Policy:
    """The statements of one role's policies."""

    def __init__(self, statements: list[dict]) -> None:
        self.statements = [s for s in statements if s]

    def decide(self, need: Need) -> str:
        allowed = False
        for statement in self.statements:
            if not self._applies(statement, need):
                continue
            if statement["Effect"] == "Deny":
                return DENIED
            allowed = True
        return ALLOWED if allowed else NOT_ALLOWED

    @staticmethod
    def _applies(statement: dict, need: Need) -> bool:
        if "NotAction" in statement or "NotResource" in statement:
            raise UnsupportedCondition("NotAction and NotResource are not evaluated here")
        if not any(_pattern(a, ignore_case=True).fullmatch(need.action) for a in _listed(statement["Action"])):
            return False
        if not any(_pattern(r).fullmatch(need.resource) for r in _listed(statement.get("Resource", "*"))):
            return False
        return all(
            _condition_holds(operator, key, expected, need.context)
            for operator, keys in (statement.get("Condition") or {}).items()
            for key, expected in keys.items()
        )
