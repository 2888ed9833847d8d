"""Every AWS call each function's code can make, held against its role in template.yaml as
``sam deploy`` creates it, for every combination of the template's Conditions. The running
tests hold the calls they make to the same roles (local.iam); this list also covers the calls
no test makes, and a check of the adapters' source keeps it complete."""

import ast
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codspeed_local.iam import ALLOWED, Resolver, function_policies, load_template, needs, translate
from codspeed_local.iam.enforcer import resource_family
from codspeed_local.iam.roles import ACCOUNT, REGION

ROOT = Path(__file__).resolve().parents[2]
TABLE, BUCKET = "codspeed-runs", "codspeed-bundles"
FINALIZE = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/codspeed-finalize"
ARRIVALS = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/codspeed-arrivals"
ARRIVALS_DLQ = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/codspeed-arrivals-dlq"
KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
PHYSICAL = {
    "RunsTable": {"Ref": TABLE, "Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}"},
    "BundlesBucket": {"Ref": BUCKET, "Arn": f"arn:aws:s3:::{BUCKET}"},
    "FinalizeQueue": {"Ref": FINALIZE, "Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:codspeed-finalize"},
    "ArrivalsQueue": {"Ref": ARRIVALS, "Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:codspeed-arrivals"},
    "ArrivalsDeadLetterQueue": {"Ref": ARRIVALS_DLQ, "Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:codspeed-arrivals-dlq"},
}
RUN = "acme/widgets/7044765741"
SECRETS = {
    "api": "/codspeed-aggregator/api-token",
    "webhook": "/codspeed-aggregator/webhook-secret",
    "github": "/codspeed-aggregator/github-token",
    "gitlab": "/codspeed-aggregator/gitlab-token",
    "upstream": "/codspeed-aggregator/upstream-token",
}


def _ledger(*extra):
    return [("dynamodb", op, {"TableName": TABLE}) for op in ("GetItem", "PutItem", "Query", "UpdateItem", *extra)]


def _transaction(*checks):
    return (
        "dynamodb",
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Update": {"TableName": TABLE}},
                {"Put": {"TableName": TABLE}},
                *({check: {"TableName": TABLE}} for check in checks),
            ]
        },
    )


def _object(op, key, **extra):
    return ("s3", op, {"Bucket": BUCKET, "Key": key, **extra})


def _spooled(prefix):  # SpoolWriter: one PUT, or a multipart upload, or its abort
    key = f"{prefix}/{RUN}/part-0000.tar.gz"
    return [
        _object(op, key)
        for op in (
            "PutObject",
            "CreateMultipartUpload",
            "UploadPart",
            "CompleteMultipartUpload",
            "AbortMultipartUpload",
        )
    ]


def _reports():  # publish, and read the latest version back (a baseline's report, or the run's own); its digest
    key, digest = f"reports/{RUN}/v00000001.json", f"reports/{RUN}/summaries.json.gz"
    return [
        _object("PutObject", key),
        _object("GetObject", key),
        ("s3", "ListObjectsV2", {"Bucket": BUCKET, "Prefix": f"reports/{RUN}/v"}),
        _object("PutObject", digest),
        _object("GetObject", digest),
        ("s3", "ListObjectsV2", {"Bucket": BUCKET, "Prefix": digest}),
    ]


def _copied(prefix, version):  # a carried shard's object, copied beside the run that keeps it (keep_sources)
    source = {
        "Bucket": BUCKET,
        "Key": f"{prefix}/acme/widgets/7044765700/1/0123abcd.tar.gz",
        **({"VersionId": version} if version else {}),
    }
    return _object("CopyObject", f"{prefix}/{RUN}/1/0123abcd.tar.gz", CopySource=source)


def _results():  # each shard's benchmarks, read for a report's summaries, a shard's page, the benchmarks lost
    return _object("GetObject", f"results/{RUN}/1/0123abcd.json.gz")


def _secret(name):
    return ("ssm", "GetParameter", {"Name": SECRETS[name], "WithDecryption": True})


# Every call each function's code can make (the event source mappings' own receives are below).
CALLS = {
    "ApiFunction": [
        *_ledger(),
        ("dynamodb", "BatchGetItem", {"RequestItems": {TABLE: {}}}),
        _object("PutObject", f"bundles/{RUN}/1/0123abcd.tar.gz"),  # the presigned upload URL
        *_reports(),
        _results(),
        ("sqs", "SendMessage", {"QueueUrl": FINALIZE}),
        _secret("api"),
        _secret("webhook"),
        _secret("github"),
        _secret("gitlab"),
    ],
    "ArrivalsFunction": [
        *_ledger(),
        ("dynamodb", "BatchGetItem", {"RequestItems": {TABLE: {}}}),
        _transaction(),
        _object("GetObject", f"bundles/{RUN}/1/0123abcd.tar.gz", VersionId="v1"),
        _object("GetObject", f"bundles/{RUN}/1/0123abcd.tar.gz"),
        *_spooled("normalized"),
        _object("PutObject", f"normalized/{RUN}/1/0123abcd.index.json"),
        *_reports(),
        _object("PutObject", f"results/{RUN}/1/0123abcd.json.gz"),
        _results(),
        ("sqs", "SendMessage", {"QueueUrl": FINALIZE}),
        ("sqs", "SendMessage", {"QueueUrl": ARRIVALS}),
        ("sqs", "SendMessage", {"QueueUrl": ARRIVALS_DLQ}),  # an event deferred past MAX_DEFERRALS
        ("sqs", "ChangeMessageVisibility", {"QueueUrl": ARRIVALS}),
        _secret("webhook"),
        _secret("github"),
        _secret("gitlab"),
    ],
    "FinalizerFunction": [  # ConditionCheck: a parts run's shard is claimed while the run is open
        *_ledger(),
        ("dynamodb", "BatchWriteItem", {"RequestItems": {TABLE: []}}),  # a finished run's carried shards
        ("dynamodb", "BatchGetItem", {"RequestItems": {TABLE: {}}}),
        _transaction("ConditionCheck"),
        _object("GetObject", f"bundles/{RUN}/1/0123abcd.tar.gz", VersionId="v1"),
        _object("GetObject", f"bundles/{RUN}/1/0123abcd.tar.gz"),  # an overdue arrival the close counts, as listed
        _object("GetObject", f"normalized/{RUN}/1/0123abcd.tar.gz", VersionId="v1"),
        _object("GetObject", f"normalized/{RUN}/1/0123abcd.index.json", VersionId="v1"),
        *_spooled("spool"),
        _object("GetObject", f"spool/{RUN}/part-0000.tar.gz", VersionId="v1"),
        ("s3", "ListObjectsV2", {"Bucket": BUCKET, "Prefix": f"bundles/{RUN}/"}),
        _object("PutObjectTagging", f"bundles/{RUN}/1/0123abcd.tar.gz"),
        *_reports(),
        _results(),
        _object("PutObject", f"plans/{RUN}/plan.json"),
        _object("GetObject", f"plans/{RUN}/plan.json", VersionId="v1"),
        _object("GetObject", f"plans/{RUN}/0123abcd/part-000001.json"),
        *(_copied(prefix, version) for prefix, version in (("bundles", "v1"), ("normalized", "v1"), ("results", None))),
        _object("PutObject", f"normalized/{RUN}/1/4567cdef.index.json"),
        ("sqs", "SendMessage", {"QueueUrl": FINALIZE}),
        ("sqs", "ChangeMessageVisibility", {"QueueUrl": FINALIZE}),
        _secret("upstream"),
        _secret("webhook"),
        _secret("github"),
        _secret("gitlab"),
        (
            "ssm",
            "GetParameter",
            {
                "Name": "/codspeed-aggregator/upstream-tokens/platform/perf/engine",  # a project's own
                "WithDecryption": True,
            },
        ),
    ],
    "SweeperFunction": [
        ("dynamodb", "Query", {"TableName": TABLE, "IndexName": "open-runs"}),
        ("dynamodb", "UpdateItem", {"TableName": TABLE}),
        ("sqs", "SendMessage", {"QueueUrl": FINALIZE}),
    ],
}
# What Lambda's event source mapping does with the function's role: receive and delete its queue's messages.
EVENT_SOURCES = {"ArrivalsFunction": ARRIVALS, "FinalizerFunction": FINALIZE}
# Calls only the operator's commands make, under no template role: `token revoke`.
OPERATOR_ONLY = {("dynamodb", "DeleteItem")}

COMBINATIONS = [
    dict(zip(("AlarmEmail", "PublicUrl", "ParametersKeyArn"), values, strict=False))
    for values in itertools.product(("", "ops@example.com"), ("", "https://bench.example.com"), ("", KEY))
]


@pytest.fixture(scope="module")
def template():
    return load_template()


@pytest.fixture(scope="module")
def translated(template):
    return translate(template)


def _needs(function: str, key: str | None):
    found = [
        need
        for service, op, params in CALLS[function]
        for need in needs(service, op, params, REGION, ACCOUNT, parameters_key=key)
    ]
    queue = EVENT_SOURCES.get(function)
    return found + (
        [
            need
            for op in ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
            for need in needs("sqs", op, {"QueueUrl": queue}, REGION, ACCOUNT)
        ]
        if queue
        else []
    )


@pytest.mark.parametrize("parameters", COMBINATIONS, ids=lambda p: ",".join(f"{k}={bool(v)}" for k, v in p.items()))
def test_every_call_each_function_can_make_is_allowed_and_nothing_more_is_granted(template, translated, parameters):
    policies = function_policies(translated, Resolver(template, parameters, PHYSICAL))
    assert set(policies) == set(CALLS)
    for function, policy in policies.items():
        wanted = _needs(function, parameters["ParametersKeyArn"] or None)
        refused = [(n.action, n.resource) for n in wanted if policy.decide(n) != ALLOWED]
        assert not refused, f"{function} may not: {refused}"
        granted = {(a, r) for s in policy.statements for a in _listed(s["Action"]) for r in _listed(s["Resource"])}
        used = {(n.action, resource_family(n.resource)) for n in wanted}
        unused = {
            (a, r)
            for a, r in granted
            if not any(
                a == action and (r == resource or r.endswith("*") and resource.startswith(r[:-1]))
                for action, resource in used
            )
        }
        assert not unused, f"{function} is granted what its code never asks for: {unused}"
        assert all(r != "*" and "*" not in a for a, r in granted), function


def _listed(value):
    return value if isinstance(value, list) else [value]


def test_the_parameters_key_is_decrypted_through_ssm_only_and_only_when_there_is_one(template, translated):
    with_key = function_policies(translated, Resolver(template, {"ParametersKeyArn": KEY}, PHYSICAL))
    without = function_policies(translated, Resolver(template, {}, PHYSICAL))
    [decrypt] = needs("ssm", "GetParameter", {"Name": SECRETS["api"], "WithDecryption": True}, REGION, ACCOUNT, KEY)[1:]
    assert with_key["ApiFunction"].decide(decrypt) == ALLOWED and without["ApiFunction"].decide(decrypt) != ALLOWED
    direct = type(decrypt)("kms:Decrypt", KEY, {})  # not through SSM: refused
    assert with_key["ApiFunction"].decide(direct) != ALLOWED
    assert not any("kms:" in str(s) for s in with_key["SweeperFunction"].statements)  # it reads no secret


def test_a_grant_removed_from_the_template_is_a_call_refused(template):
    import copy

    broken = copy.deepcopy(template)
    statements = broken["Resources"]["FinalizerFunction"]["Properties"]["Policies"][0]["Statement"]
    spool = next(s for s in statements if "spool" in str(s.get("Resource")))
    spool["Action"] = [a for a in spool["Action"] if a != "s3:GetObjectVersion"]
    policies = function_policies(translate(broken), Resolver(broken, {}, PHYSICAL))
    refused = [n for n in _needs("FinalizerFunction", None) if policies["FinalizerFunction"].decide(n) != ALLOWED]
    assert [(n.action, n.resource) for n in refused] == [
        ("s3:GetObjectVersion", f"arn:aws:s3:::{BUCKET}/spool/{RUN}/part-0000.tar.gz")
    ]


def _calls_in(path: Path) -> set[tuple[str, str]]:
    """The boto3 operations a module calls on its clients (``self.s3.get_object(...)``, paginators, presigns)."""
    services = {"s3": "s3", "db": "dynamodb", "sqs": "sqs"}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        if isinstance(owner, ast.Attribute) and owner.attr in services:
            name, service = node.func.attr, services[owner.attr]
            if name in ("get_paginator", "generate_presigned_url"):
                name = node.args[0].value
            found.add((service, "".join(part.title() for part in name.split("_"))))
    return found


def test_the_list_holds_every_aws_call_the_adapters_make():
    made = set().union(*(_calls_in(p) for p in (ROOT / "functions/codspeed_aggregator/adapters").rglob("*.py")))
    listed = {(service, op) for calls in CALLS.values() for service, op, _ in calls}
    assert made, "no call found: the scan reads nothing"
    assert made - listed <= OPERATOR_ONLY, (
        f"calls no function lists (add them to CALLS): {made - listed - OPERATOR_ONLY}"
    )


def test_alarms_reach_the_email_given_through_a_key_cloudwatch_may_use(template, translated):
    resources = translated["Resources"]
    subscription = resources["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail" and subscription["Properties"]["Protocol"] == "email"
    for email, subscribed in (("ops@example.com", True), ("", False)):
        resolver = Resolver(template, {"AlarmEmail": email}, PHYSICAL)
        assert resolver.conditions["HasAlarmEmail"] is subscribed
        assert resolver.resolve(subscription["Properties"]["Endpoint"]) == email
    assert resources["AlarmTopic"]["Properties"]["KmsMasterKeyId"] == {"Ref": "AlarmTopicKey"}
    statements = resources["AlarmTopicKey"]["Properties"]["KeyPolicy"]["Statement"]
    cloudwatch = [s for s in statements if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert cloudwatch and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(cloudwatch[0]["Action"])


@pytest.mark.slow
def test_cfn_lint_passes_on_the_translation_of_every_combination(template, tmp_path):
    import copy
    import json

    paths = []
    for number, parameters in enumerate(COMBINATIONS):
        decided = copy.deepcopy(template)
        for name, value in parameters.items():
            decided["Parameters"][name]["Default"] = value
        path = tmp_path / f"translated-{number}.json"
        path.write_text(json.dumps(translate(decided), indent=1))
        paths.append(str(path))
    linted = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--", *paths], capture_output=True, text=True
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


KEPT = (
    "import json, sys\n"
    "from codspeed_local.iam.roles import template_translated\n"
    "template, translation = template_translated()\n"
    "print(json.dumps(['samtranslator' in sys.modules, template, translation]))\n"
)


def test_a_process_after_the_first_reads_the_translation_kept_without_the_translator(tmp_path, translated, template):
    """A local stack's start translates template.yaml once for the processes that follow (the
    translator is most of a start), and what is kept is what the translator answers."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    first, second = (
        json.loads(
            subprocess.run(
                [sys.executable, "-c", KEPT], env={**os.environ, **env}, check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(2)
    )
    assert first == [True, template, translated]
    assert second == [False, template, translated]
    assert [p.name.split("-")[0] for p in (tmp_path / "codspeed-aggregator").iterdir()] == ["template"]


@pytest.fixture
def roles(request):
    """The roles module with no translation made yet in this process, and none left made of a test's template."""
    from codspeed_local.iam import roles

    roles.template_translated.cache_clear()
    request.addfinalizer(roles.template_translated.cache_clear)
    return roles


def test_a_changed_template_is_translated_again_and_a_cache_unreadable_or_unwritable_is_only_slower(
    tmp_path, monkeypatch, template, roles
):
    edited = tmp_path / "template.yaml"
    edited.write_text(roles.TEMPLATE.read_text().replace("Description: >\n", "Description: >\n  edited\n", 1))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    original = roles._cache_file()
    monkeypatch.setattr(roles, "TEMPLATE", edited)
    assert roles._cache_file() != original
    parsed, translation = roles.template_translated()
    assert parsed["Description"].startswith("edited") and parsed != template
    assert translation == translate(parsed)

    roles._cache_file().write_text("{not json")  # a cache file cut short
    roles.template_translated.cache_clear()
    assert roles.template_translated() == (parsed, translation)
    assert json.loads(roles._cache_file().read_text()) == [parsed, translation]  # written again

    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    roles.template_translated.cache_clear()
    assert roles.template_translated() == (parsed, translation)
