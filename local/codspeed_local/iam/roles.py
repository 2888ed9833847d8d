"""Each function's role as ``sam deploy`` would create it: template.yaml translated offline by
aws-sam-translator, its Conditions decided by the stack's parameters, and its intrinsics
(``Ref``, ``Fn::GetAtt``, ``Fn::Sub``, ``Fn::If`` ...) resolved to the resources at hand."""

import copy
import json
import os
import re
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

    template = template or load_template()

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
    return function_policies(translated(), Resolver(template, {**named, **(parameters or {})}, physical))


_TRANSLATED: dict = {}


def translated() -> dict:
    """template.yaml translated, once per process (a second or two of aws-sam-translator)."""
    if "template" not in _TRANSLATED:
        _TRANSLATED["template"] = translate(load_template())
    return _TRANSLATED["template"]
