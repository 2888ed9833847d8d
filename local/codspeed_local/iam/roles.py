"""Each function's role as ``sam deploy`` would create it: template.yaml translated offline by
aws-sam-translator, its Conditions decided by the stack's parameters, and its intrinsics
(``Ref``, ``Fn::GetAtt``, ``Fn::Sub``, ``Fn::If`` ...) resolved to the resources at hand."""

import copy
import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from .policy import Policy

TEMPLATE = Path(__file__).resolve().parents[3] / "template.yaml"
REGION, ACCOUNT = "us-east-1", "123456789012"  # moto's account
NO_VALUE = object()
_INTRINSICS = {
    "Ref": "_ref",
    "Fn::GetAtt": "_get_att",
    "Fn::Sub": "_sub",
    "Fn::Join": "_join",
    "Fn::If": "_if",
    "Fn::Equals": "_equals",
    "Fn::Not": "_not",
    "Fn::And": "_and",
    "Fn::Or": "_or",
    "Condition": "condition",
}


def load_template(path: Path = TEMPLATE) -> dict:
    from samtranslator.yaml_helper import yaml_parse

    return yaml_parse(path.read_text())


def translate(template: dict) -> dict:
    """What CloudFormation gets from ``sam deploy``: no SAM resource left, every role explicit."""
    from samtranslator.translator.transform import transform

    class NoManagedPolicies:  # the template attaches none by name; the loader would ask IAM
        def load(self):
            return {}

    packaged = copy.deepcopy(template)
    packaged["Globals"]["Function"]["CodeUri"] = "s3://packaged-code/functions.zip"  # what `sam package` does
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    return json.loads(json.dumps(transform(packaged, {}, NoManagedPolicies())))


class Resolver:
    """Resolves intrinsics against parameter values and the physical resources of a stack."""

    def __init__(self, template: dict, parameters: dict[str, str], physical: dict[str, dict]) -> None:
        declared = template.get("Parameters") or {}
        self.parameters = {name: parameters.get(name, spec.get("Default", "")) for name, spec in declared.items()}
        for name, spec in declared.items():
            if spec.get("Type") == "CommaDelimitedList" and isinstance(self.parameters[name], str):
                self.parameters[name] = [v for v in self.parameters[name].split(",") if v]
        self.physical = physical  # logical id -> {"Ref": ..., "Arn": ..., other attributes}
        self.pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "codspeed-aggregator",
        }
        self._raw_conditions = template.get("Conditions") or {}
        self._decided: dict[str, bool] = {}
        self.conditions = {name: self.condition(name) for name in self._raw_conditions}

    def condition(self, name: str) -> bool:
        if name not in self._decided:
            self._decided[name] = bool(self.resolve(self._raw_conditions[name]))
        return self._decided[name]

    def resolve(self, value):
        if isinstance(value, list):
            return [r for r in map(self.resolve, value) if r is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1 and (kind := next(iter(value))) in _INTRINSICS:
            return getattr(self, _INTRINSICS[kind])(value[kind])
        return {k: r for k, v in value.items() if (r := self.resolve(v)) is not NO_VALUE}

    def _get_att(self, arg) -> str:
        logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
        return self._attribute(logical, attribute)

    def _join(self, arg) -> str:
        return arg[0].join(str(v) for v in self.resolve(arg[1]))

    def _if(self, arg):
        name, then, otherwise = arg
        return self.resolve(then if self.condition(name) else otherwise)

    def _equals(self, arg) -> bool:
        left, right = self.resolve(arg)
        return left == right

    def _not(self, arg) -> bool:
        return not self.resolve(arg[0])

    def _and(self, arg) -> bool:
        return all(self.resolve(arg))

    def _or(self, arg) -> bool:
        return any(self.resolve(arg))

    def _ref(self, name: str):
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        return self._attribute(name, "Ref")

    def _attribute(self, logical: str, attribute: str) -> str:
        known = self.physical.get(logical) or {}
        return known.get(attribute, f"arn:aws:local:{REGION}:{ACCOUNT}:{logical}/{attribute}")

    def _sub(self, arg) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))

        def one(match: re.Match) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self._attribute(*name.split(".", 1)))
            return str(self._ref(name))

        return re.sub(r"\$\{([^}!][^}]*)\}", one, text)


def function_policies(translated: dict, resolver: Resolver) -> dict[str, Policy]:
    """Each function's policy statements (its role's inline policies), by the function's logical id."""
    resources = translated["Resources"]
    found = {}
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        role = resources[resource["Properties"]["Role"]["Fn::GetAtt"][0]]
        statements = [
            s
            for policy in resolver.resolve(role["Properties"].get("Policies") or [])
            for s in policy["PolicyDocument"]["Statement"]
        ]
        found[name] = Policy(statements)
    return found


# Where the functions read their secrets: the SSM parameters the template names, as the
# environment of a function names them (the local stack passes most secrets directly).
_PARAMETER_VARIABLES = {
    "ApiTokenParameter": "API_TOKEN_PARAMETER",
    "UpstreamTokenParameter": "UPSTREAM_TOKEN_PARAMETER",
    "WebhookSecretParameter": "WEBHOOK_SECRET_PARAMETER",
    "GitHubTokenParameter": "GITHUB_TOKEN_PARAMETER",
}


def local_policies(
    resources, parameters: dict[str, str] | None = None, template: dict | None = None
) -> dict[str, Policy]:
    """The roles of the functions as they would be deployed, on the local stack's ``resources``."""
    from .calls import queue_arn

    parsed, translation = template_translated()
    template = template or parsed

    def queue(url: str) -> dict:
        return {"Ref": url, "Arn": queue_arn(url, REGION), "QueueName": url.rsplit("/", 1)[1]}

    physical = {
        "RunsTable": {"Ref": resources.table, "Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{resources.table}"},
        "BundlesBucket": {"Ref": resources.bucket, "Arn": f"arn:aws:s3:::{resources.bucket}"},
        "ArrivalsQueue": queue(resources.arrivals_queue_url),
        "FinalizeQueue": queue(resources.finalize_queue_url),
        "FinalizeDeadLetterQueue": queue(resources.finalize_dlq_url),
        "ArrivalsDeadLetterQueue": queue(resources.arrivals_dlq_url),
    }
    named = {name: os.environ[variable] for name, variable in _PARAMETER_VARIABLES.items() if os.environ.get(variable)}
    return function_policies(translation, Resolver(template, {**named, **(parameters or {})}, physical))


@functools.cache
def template_translated() -> tuple[dict, dict]:
    """template.yaml parsed and translated: once per process, and kept for the next in the user's cache
    folder under a name that changes with the template, this module and aws-sam-translator's version.
    Importing and running the translator was 0.9 s of a local stack's 1.6 s start (and of each test
    process's), for the same answer every time."""

    def made() -> tuple[dict, dict]:
        template = load_template(TEMPLATE)  # the file the key is made from
        return template, translate(template)

    return _kept(_cache_file(), made)


def _cache_file() -> Path:
    from importlib.metadata import PackageNotFoundError, version

    try:
        translator = version("aws-sam-translator")
    except PackageNotFoundError:  # not installed: load_template says so
        translator = ""
    key = hashlib.sha256(b"\0".join([TEMPLATE.read_bytes(), Path(__file__).read_bytes(), translator.encode()]))
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "codspeed-aggregator"
    return folder / f"template-{key.hexdigest()[:24]}.json"


def _kept(path: Path, made: Callable[[], tuple[dict, dict]]) -> tuple[dict, dict]:
    """What ``path`` keeps, else ``made()``, written there for the next process (atomically: processes
    start together); a cache that cannot be read or written is only slower."""
    try:
        template, translation = json.loads(path.read_text())
        return template, translation
    except (OSError, ValueError):
        pass
    template, translation = made()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
            json.dump([template, translation], out)
        os.replace(out.name, path)
    except OSError:
        pass
    return template, translation
