"""template.yaml, checked offline: cfn-lint, SAM translation, cfn-lint again, and parity with the code."""

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"


@pytest.fixture(scope="module")
def template() -> dict:
    return yaml_parse(TEMPLATE.read_text())


@pytest.fixture(scope="module")
def translated(template, tmp_path_factory) -> Path:
    packaged = json.loads(json.dumps(template))
    packaged["Globals"]["Function"]["CodeUri"] = "s3://packaged-code/functions.zip"  # what `sam package` does

    class NoManagedPolicies:
        def load(self):
            return {}

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    out = tmp_path_factory.mktemp("cfn") / "translated.json"
    out.write_text(json.dumps(transform(packaged, {}, NoManagedPolicies()), indent=1))
    return out


def _lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--", str(path)], capture_output=True, text=True
    )


@pytest.mark.slow
def test_cfn_lint_passes_on_the_sam_template():
    result = _lint(TEMPLATE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cfn_lint_passes_on_the_translated_template(translated):
    result = _lint(translated)
    assert result.returncode == 0, result.stdout + result.stderr


def _functions(template):
    return {
        name: r["Properties"] for name, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"
    }


def test_every_handler_named_in_the_template_imports(template):
    for name, props in _functions(template).items():
        module, _, attribute = props["Handler"].rpartition(".")
        assert callable(getattr(importlib.import_module(module), attribute)), name


def test_every_setting_the_code_reads_is_in_each_functions_environment(template):
    source = (ROOT / "functions/codspeed_aggregator/settings.py").read_text()
    required = set(re.findall(r'env\.get\("([A-Z_]+)", ""\)', source))
    assert required == {
        "TABLE_NAME",
        "BUCKET_NAME",
        "FINALIZE_QUEUE_URL",
        "ARRIVALS_QUEUE_URL",
        "ARRIVALS_DEAD_LETTER_QUEUE_URL",
        "UPSTREAM_URL",
    }
    shared = set(template["Globals"]["Function"]["Environment"]["Variables"])
    own = {name: set(p.get("Environment", {}).get("Variables", {})) for name, p in _functions(template).items()}
    for name in own:
        assert {"TABLE_NAME", "BUCKET_NAME", "FINALIZE_QUEUE_URL"} <= shared | own[name], name
    assert {"UPSTREAM_URL", "UPSTREAM_TOKEN_PARAMETER"} <= own["FinalizerFunction"]
    assert {"ARRIVALS_QUEUE_URL", "ARRIVALS_DEAD_LETTER_QUEUE_URL"} <= own["ArrivalsFunction"]
    assert "API_TOKEN_PARAMETER" in own["ApiFunction"]


def test_the_bucket_blocks_public_access_and_denies_requests_without_tls(template):
    bucket = template["Resources"]["BundlesBucket"]["Properties"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    statement = template["Resources"]["BundlesBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_policies_grant_no_wildcard_actions_and_no_deletes(template):
    for name, props in _functions(template).items():
        for policy in props["Policies"]:
            for statement in policy["Statement"]:
                statement = statement["Fn::If"][1] if "Fn::If" in statement else statement  # one granted on a condition
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                # deleting a received message is how a queue's consumer says it is done, on its own queue only
                deletes = [a for a in actions if "Delete" in a and a != "sqs:DeleteMessage"]
                assert not [a for a in actions if "*" in a] and not deletes, (name, actions)


def test_queues_have_dead_letter_queues_and_the_local_stack_mirrors_the_table(template):
    from codspeed_aggregator.adapters.ledger.codec import OPEN_INDEX

    for name in ("ArrivalsQueue", "FinalizeQueue"):
        assert "deadLetterTargetArn" in template["Resources"][name]["Properties"]["RedrivePolicy"]
    table = template["Resources"]["RunsTable"]["Properties"]
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == [OPEN_INDEX]


def test_dead_letters_outlive_the_stack_and_a_failed_forward_is_alarmed_before_sqs_drops_it(template):
    resources = template["Resources"]
    for name in ("ArrivalsDeadLetterQueue", "FinalizeDeadLetterQueue"):
        assert resources[name]["DeletionPolicy"] == resources[name]["UpdateReplacePolicy"] == "Retain", name
        retention = resources[name]["Properties"]["MessageRetentionPeriod"]
        assert retention == 14 * 86400, name  # SQS's most, counted from the first enqueue
    aged = resources["FinalizeDeadLetterAgeAlarm"]["Properties"]
    assert aged["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert aged["Threshold"] < resources["FinalizeDeadLetterQueue"]["Properties"]["MessageRetentionPeriod"]


def test_an_arrival_in_the_dead_letter_queue_is_alarmed_and_redrivable_before_its_bundle_can_expire(template):
    """It waited 14 days with no age alarm, no output and no redrive, while a run of parts tags its
    bundles to expire PartsBundleRetentionDays (2 days) after its forward."""
    resources, outputs = template["Resources"], template["Outputs"]
    aged = resources["ArrivalsDeadLetterAgeAlarm"]["Properties"]
    assert aged["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert aged["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["ArrivalsDeadLetterQueue", "QueueName"]}
    parts_days = template["Parameters"]["PartsBundleRetentionDays"]["Default"]
    assert aged["Threshold"] < parts_days * 86400
    assert outputs["ArrivalsDeadLetterQueueUrl"]["Value"] == {"Ref": "ArrivalsDeadLetterQueue"}
    assert outputs["ArrivalsQueueUrl"]["Value"] == {"Ref": "ArrivalsQueue"}


def test_an_expired_or_replaced_bundle_version_is_gone_two_weeks_later_not_a_retention_later(template):
    """A current version's expiry leaves its bytes noncurrent: with the retention there too, an
    abandoned bundle lived BundleMaxAgeDays + BundleRetentionDays (210 days, not 180). Noncurrent
    versions live 15 days: a validated bundle read by version id, for as long as a failed forward
    waits in the dead-letter queue (14 days)."""
    rules = {
        r["Id"]: r for r in template["Resources"]["BundlesBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    }
    days = rules["expire-noncurrent-versions"]["NoncurrentVersionExpiration"]["NoncurrentDays"]
    dead_letters = template["Resources"]["FinalizeDeadLetterQueue"]["Properties"]["MessageRetentionPeriod"] / 86400
    assert days == 15 and days > dead_letters


def test_every_alarm_notifies_the_alarm_topic(template):
    alarms = {
        name: r["Properties"] for name, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    assert {
        "ArrivalsDeadLetterAlarm",
        "ArrivalsDeadLetterAgeAlarm",
        "FinalizeDeadLetterAlarm",
        "ArrivalsBacklogAlarm",
        "ForwardFailedAlarm",
        "ApiServerErrorsAlarm",
        "FinalizerNearTimeoutAlarm",
        "FinalizerFunctionErrorsAlarm",
    } <= set(alarms)
    for name, props in alarms.items():
        assert props["AlarmActions"] == [{"Ref": "AlarmTopic"}], name


def test_the_tests_run_on_the_moto_and_the_packages_constraints_txt_pins():
    """The local stack patches moto's internals: a fresh machine gets the moto they were written
    against, and every package of the local, test and docs extras as the tests ran here."""
    import importlib.metadata

    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if line and line[0] != "#"
    )
    assert {"moto", "pytest", "pytest-xdist", "hypothesis", "playwright", "cfn-lint", "mkdocs"} <= set(pins)
    wrong = {name: (version, importlib.metadata.version(name)) for name, version in pins.items()}
    assert {n: v for n, v in wrong.items() if v[0] != v[1]} == {}, "constraints.txt pin, installed"
    deployed = dict(
        line.split("==") for line in (ROOT / "functions/requirements.txt").read_text().splitlines() if line[0] != "#"
    )
    assert all(pins[name] == version for name, version in deployed.items() if name in pins)  # one environment


def test_the_moto_speed_shortcuts_are_off_with_one_switch_and_moto_answers_alike(tmp_path):
    """A moto that changed under the shortcuts: CODSPEED_LOCAL_MOTO_SPEEDUPS=0 runs moto as it ships."""
    import subprocess
    import sys

    script = (
        "import boto3\n"
        "from moto import backends\n"
        "from codspeed_local.moto_server import start_moto\n"
        "server = start_moto()\n"
        "url = f'http://127.0.0.1:{server.server_port}'\n"
        "db = boto3.client('dynamodb', endpoint_url=url, region_name='us-east-1', aws_access_key_id='k', "
        "aws_secret_access_key='s')\n"
        "db.create_table(TableName='t', KeySchema=[{'AttributeName': 'pk', 'KeyType': 'HASH'}], "
        "AttributeDefinitions=[{'AttributeName': 'pk', 'AttributeType': 'S'}], BillingMode='PAY_PER_REQUEST')\n"
        "db.put_item(TableName='t', Item={'pk': {'S': 'a'}, 'n': {'N': '1'}})\n"
        "item = db.get_item(TableName='t', Key={'pk': {'S': 'a'}})['Item']\n"
        "print(getattr(backends.list_of_moto_modules, 'listed_once', False), item['n']['N'])\n"
        "server.shutdown()\n"
    )
    for switch, patched in (("0", "False"), ("1", "True")):
        env = {**__import__("os").environ, "CODSPEED_LOCAL_MOTO_SPEEDUPS": switch}
        ran = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert ran.stdout.split() == [patched, "1"], (switch, ran.stdout)


def test_what_is_deployed_is_what_the_tests_ran_against():
    import importlib.metadata

    pins = [
        line.split("==")
        for line in (ROOT / "functions/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert pins and all(len(pin) == 2 for pin in pins), "every requirement is pinned with =="
    for name, version in pins:
        assert importlib.metadata.version(name) == version, (
            f"{name}: tested {importlib.metadata.version(name)}, deployed {version}"
        )
    names = {name.lower().replace("_", "-") for name, _ in pins}
    assert {
        "aws-lambda-powertools",
        "boto3",
        "pydantic",
        "requests",
        "isal",
        "pyjwt",
        "cryptography",
        "aws-xray-sdk",
    } <= names


def test_no_function_gets_a_managed_policy_that_reaches_every_queue(template):
    for name, props in _functions(template).items():
        assert not [e for e in (props.get("Events") or {}).values() if e["Type"] == "SQS"], name
        assert all(isinstance(p, dict) for p in props["Policies"]), name  # inline statements only, no managed policy
    mappings = {
        r["Properties"]["FunctionName"]["Ref"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
    }
    assert mappings["ArrivalsFunction"]["EventSourceArn"] == {"Fn::GetAtt": ["ArrivalsQueue", "Arn"]}
    assert mappings["FinalizerFunction"]["EventSourceArn"] == {"Fn::GetAtt": ["FinalizeQueue", "Arn"]}


def test_the_deployed_roles_hold_no_managed_sqs_policy(translated):
    roles = [r for r in json.loads(translated.read_text())["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    assert roles
    for role in roles:
        managed = json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        assert "SQS" not in managed, managed


def test_functions_are_sized_for_the_cpu_their_work_takes_and_queues_outlast_them(template):
    resources, parameters = template["Resources"], template["Parameters"]
    arrivals, finalizer = resources["ArrivalsFunction"]["Properties"], resources["FinalizerFunction"]["Properties"]
    assert arrivals["MemorySize"] >= 1769 and parameters["MergeMemorySize"]["MinValue"] >= 1769  # one vCPU each
    reserve = int(arrivals["Environment"]["Variables"]["ARRIVAL_RESERVE_SECONDS"])
    assert 0 < reserve <= arrivals["Timeout"] / 2
    # the largest bundle's reserve (its floor, then 5 GiB at the rate bench/scale.py holds) fits one invocation
    rate = float(arrivals["Environment"]["Variables"]["ARRIVAL_MIB_PER_SECOND"])
    assert reserve + 5 * 1024 / rate < arrivals["Timeout"]
    # Lambda asks an SQS source's visibility timeout to be six times the function's timeout
    assert resources["ArrivalsQueue"]["Properties"]["VisibilityTimeout"] >= 6 * arrivals["Timeout"]
    assert resources["FinalizeQueue"]["Properties"]["VisibilityTimeout"] >= 6 * finalizer["Timeout"]
    assert int(finalizer["Environment"]["Variables"]["MAX_PART_BYTES"]) < 5 * 10**9  # S3's largest PUT
    assert int(finalizer["Environment"]["Variables"]["FINALIZE_LEASE_SECONDS"]) > finalizer["Timeout"]


def test_an_alarm_that_names_a_time_names_its_threshold(template):
    """The backlog alarm said 15 minutes of a 1800 s threshold."""
    import re

    said = 0
    for name, resource in template["Resources"].items():
        props = resource["Properties"] if resource["Type"] == "AWS::CloudWatch::Alarm" else {}
        found = re.search(r"(\d+) minutes", props.get("AlarmDescription", ""))
        if found and props.get("MetricName") == "ApproximateAgeOfOldestMessage":
            said += 1
            assert int(found.group(1)) * 60 == props["Threshold"], name
    assert said >= 1


def test_the_api_may_reserve_its_concurrency_and_reserves_none_by_default(template):
    """A burst on the API could take the account's concurrency from the finalizer: a stack may cap
    it; none by default, since Lambda refuses a reservation that leaves under 100 unreserved."""
    parameter = template["Parameters"]["ApiReservedConcurrency"]
    reserved = template["Resources"]["ApiFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert parameter["Default"] == 0 and reserved == {
        "Fn::If": ["ReservesApiConcurrency", {"Ref": "ApiReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    assert template["Conditions"]["ReservesApiConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ApiReservedConcurrency"}, 0]}]
    }
