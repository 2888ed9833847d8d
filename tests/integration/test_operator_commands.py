"""Every operator command of ``codspeed-aggregator`` against a deployed stack, run as an operator would
without AWS credentials, and with credentials AWS refuses: one sentence and exit 3, never a traceback.
AWS's refusal is played by a stand-in on loopback answering every call as AWS's JSON protocol answers an
access denied (``AccessDeniedException``): DynamoDB's, SSM's and SQS's."""

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
COMMANDS = {
    "token create": ["token", "create", "--project", "acme/widgets"],
    "token revoke": ["token", "revoke", "--token", "cst_abc"],
    "webhook-secret": ["webhook-secret", "--project", "acme/widgets"],
    "webhook-check": ["webhook-check", "--url", "https://example.invalid/webhooks/github", "--project", "acme/widgets"],
    "refresh-event": ["refresh-event", "--project", "acme/widgets", "--run-id", "r1"],
    "redrive": ["redrive", "--queue", "finalize", "--dead-letter-url", QUEUE, "--queue-url", QUEUE],
}


class _Refusing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 -- http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"__type": "AccessDeniedException", "message": "User is not authorized to perform this"})
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def refusing_aws():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _run(args: list[str], endpoint: str, credentials: bool, region: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in ("WEBHOOK_SECRET",)}
    env |= {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,  # never AWS itself, from a test
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_CONFIG_FILE": "/nonexistent",
        "TABLE_NAME": "codspeed-runs",
        "WEBHOOK_SECRET_PARAMETER": "/codspeed-aggregator/webhook-secret",
    }
    if not region:
        del env["AWS_DEFAULT_REGION"]
    if credentials:
        env |= {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE00", "AWS_SECRET_ACCESS_KEY": "example"}
    return subprocess.run(
        [sys.executable, "-m", "codspeed_aggregator.cli", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_no_region_is_one_sentence_too(refusing_aws):
    env_less = _run(COMMANDS["token create"], refusing_aws, credentials=True, region=False)
    assert (env_less.returncode, env_less.stderr.strip()) == (
        3,
        "codspeed-aggregator: no AWS region: set AWS_DEFAULT_REGION (or AWS_PROFILE's region) to the stack's",
    )


@pytest.mark.parametrize("credentials", [False, True], ids=["no-credentials", "access-denied"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_operator_command_says_one_sentence_and_exits_3_without_credentials_or_refused(
    refusing_aws, command, credentials
):
    """``webhook-secret`` without credentials printed a 69-line traceback (powertools' GetParameterError)."""
    done = _run(COMMANDS[command], refusing_aws, credentials)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    [said] = done.stderr.strip().splitlines()  # one sentence
    assert said.startswith("codspeed-aggregator: ")
    if credentials:
        assert "AccessDenied" in said, said
    else:
        assert said.startswith("codspeed-aggregator: no AWS credentials: give the stack's account's"), said


def _checked(stack, url: str, secret: str, *scope: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {"WEBHOOK_SECRET": secret}
    return subprocess.run(
        [sys.executable, "-m", "codspeed_aggregator.cli", "webhook-check", "--url", url, *scope],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "scope", [["--project", "acme/widgets"], ["--owner", "acme"]], ids=["repository", "organization"]
)
def test_webhook_check_sends_githubs_ping_as_its_form_sends_it_and_says_it_is_taken(stack, scope):
    done = _checked(stack, f"{stack.api_url}/webhooks/github", stack.webhook_secret, *scope)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f'{stack.api_url}/webhooks/github answered 200 {{"message":"pong"}}: GitHub\'s ping')
    assert f"signed with {scope[1]}'s webhook secret" in done.stdout


@pytest.mark.parametrize(
    ("path", "secret", "code", "said"),
    [
        ("/webhooks/github", "another-stacks-secret", 3, "answered 401 {"),
        ("/hooks/webhooks/github", None, 3, "answered 404 {"),
        (
            "/webhooks/refresh",
            None,
            2,
            "is no Payload URL: give the stack's ApiUrl output followed by /webhooks/github",
        ),
    ],
    ids=["another-secret", "no-route", "not-the-payload-url"],
)
def test_webhook_check_names_what_is_wrong_in_one_sentence(stack, path, secret, code, said):
    done = _checked(stack, f"{stack.api_url}{path}", secret or stack.webhook_secret, "--project", "acme/widgets")
    assert done.returncode == code, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("codspeed-aggregator: ") and done.stdout == "", line
    assert all(words in line for words in said), line


def test_webhook_check_of_a_url_nothing_answers_says_so():
    with ThreadingHTTPServer(("127.0.0.1", 0), _Refusing) as server:
        port = server.server_address[1]  # bound, then closed: nothing listens there
    done = _checked(None, f"http://127.0.0.1:{port}/webhooks/github", "s", "--project", "acme/widgets")
    assert done.returncode == 3
    assert done.stderr.strip() == (
        f"codspeed-aggregator: http://127.0.0.1:{port}/webhooks/github could not be reached (ConnectionError): "
        "is it the stack's ApiUrl output?"
    )
