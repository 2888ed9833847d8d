"""How ``codspeed-aggregator``'s commands fail: one sentence, one exit code."""

USAGE, CONFIG, NOTHING, INPUT = 2, 3, 5, 7
EXIT_CODES = "exit codes: 0 done; 2 usage; 3 configuration or environment; 5 nothing to act on; 7 bad input file."


class Failure(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def aws_failure(exc: BaseException) -> Failure | None:
    """An AWS call of an operator's command that failed, in one sentence (exit 3: the environment): no
    credentials, credentials AWS refused (an access denied), or AWS out of reach; None for anything else.
    powertools' GetParameterError wraps every SSM failure: what it wraps is said."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, BotoCoreError | ClientError):
        cause = cause.__cause__ or cause.__context__  # GetParameterError raises inside its except, unchained
    if isinstance(cause, NoCredentialsError):
        return Failure(
            "no AWS credentials: give the stack's account's (AWS_PROFILE, or aws configure, or "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and its region (AWS_DEFAULT_REGION)",
            CONFIG,
        )
    if isinstance(cause, NoRegionError):
        return Failure("no AWS region: set AWS_DEFAULT_REGION (or AWS_PROFILE's region) to the stack's", CONFIG)
    if isinstance(cause, ClientError):
        error = cause.response.get("Error", {})
        code = str(error.get("Code"))
        denied = any(word in code.lower() for word in ("denied", "unauthorized", "forbidden", "invalidclienttoken"))
        advice = ": use credentials allowed to act on the stack's resources" if denied else ""
        return Failure(f"AWS refused {cause.operation_name} ({code}: {error.get('Message')}){advice}", CONFIG)
    if isinstance(cause, BotoCoreError):
        return Failure(f"AWS could not be reached or is not configured: {cause}", CONFIG)
    return None
