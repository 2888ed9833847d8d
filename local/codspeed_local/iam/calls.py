"""What IAM authorizes for each AWS call the functions make, as AWS's service authorization
reference documents it: the action (or actions) and the resource ARN each one needs, and the
condition keys the request carries."""

from urllib.parse import unquote, urlsplit

from .policy import Need


class Unmapped(Exception):
    """A call with no IAM mapping here: add it, rather than let it through unchecked."""


_S3_OBJECT = {  # operation -> (action, action when the request names a VersionId)
    "GetObject": ("s3:GetObject", "s3:GetObjectVersion"),
    "HeadObject": ("s3:GetObject", "s3:GetObjectVersion"),
    "PutObject": ("s3:PutObject", "s3:PutObject"),
    "CreateMultipartUpload": ("s3:PutObject", "s3:PutObject"),
    "UploadPart": ("s3:PutObject", "s3:PutObject"),
    "CompleteMultipartUpload": ("s3:PutObject", "s3:PutObject"),
    "AbortMultipartUpload": ("s3:AbortMultipartUpload", "s3:AbortMultipartUpload"),
    "PutObjectTagging": ("s3:PutObjectTagging", "s3:PutObjectVersionTagging"),
    "GetObjectTagging": ("s3:GetObjectTagging", "s3:GetObjectVersionTagging"),
    "DeleteObject": ("s3:DeleteObject", "s3:DeleteObjectVersion"),
}
_S3_BUCKET = {  # operation -> action on the bucket; a listing carries s3:prefix
    "ListObjectsV2": "s3:ListBucket",
    "ListObjects": "s3:ListBucket",
    "ListObjectVersions": "s3:ListBucketVersions",
    "ListMultipartUploads": "s3:ListBucketMultipartUploads",
}
_SQS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
_DYNAMODB_SIMPLE = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "DescribeTable"}


def needs(
    service: str, operation: str, params: dict, region: str, account: str, parameters_key: str | None = None
) -> list[Need]:
    """The IAM needs of one call. ``parameters_key``: the customer-managed KMS key of the SSM
    parameters, whose decryption SSM asks KMS for on the caller's behalf (kms:Decrypt)."""
    if service == "dynamodb":
        return _dynamodb(operation, params, f"arn:aws:dynamodb:{region}:{account}:table/")
    if service == "s3":
        return _s3(operation, params)
    if service == "sqs":
        return _sqs(operation, params, region)
    if service == "ssm" and operation == "GetParameter":
        return _ssm_parameter(params, region, account, parameters_key)
    raise Unmapped(f"no IAM mapping for {service}.{operation}: add it to {__name__}")


def _sqs(operation: str, params: dict, region: str) -> list[Need]:
    if operation == "StartMessageMoveTask":  # SQS moves them as the caller: reads the source, sends on
        source, found = params["SourceArn"], [Need("sqs:StartMessageMoveTask", params["SourceArn"])]
        found += [Need(f"sqs:{action}", source) for action in ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")]
        if "DestinationArn" not in params:  # back to each queue the source is the dead-letter queue of
            raise Unmapped("sqs.StartMessageMoveTask without DestinationArn: its queues are not known here")
        return found + [Need("sqs:SendMessage", params["DestinationArn"])]
    if operation == "ListMessageMoveTasks":  # on the queue messages move from
        return [Need(f"sqs:{operation}", params["SourceArn"])]
    if "QueueUrl" not in params:
        raise Unmapped(f"no IAM mapping for sqs.{operation}: add it to {__name__}")
    return [Need(f"sqs:{_SQS.get(operation, operation)}", queue_arn(params["QueueUrl"], region))]


def _ssm_parameter(params: dict, region: str, account: str, parameters_key: str | None) -> list[Need]:
    name = params["Name"].split(":", 1)[0]  # a version or label selector (name:3) is no part of the ARN
    name = name if name.startswith("/") else f"/{name}"
    found = [Need("ssm:GetParameter", f"arn:aws:ssm:{region}:{account}:parameter{name}")]
    if params.get("WithDecryption") and parameters_key:
        found.append(Need("kms:Decrypt", parameters_key, {"kms:ViaService": f"ssm.{region}.amazonaws.com"}))
    return found


def _dynamodb(operation: str, params: dict, tables: str) -> list[Need]:
    if operation in _DYNAMODB_SIMPLE:
        index = f"/index/{params['IndexName']}" if params.get("IndexName") else ""
        return [Need(f"dynamodb:{operation}", f"{tables}{params['TableName']}{index}")]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [Need(f"dynamodb:{operation}", f"{tables}{table}") for table in params["RequestItems"]]
    if operation == "TransactWriteItems":  # each item is authorized as its own write
        return [
            Need(f"dynamodb:{_TRANSACT[kind]}", f"{tables}{item[kind]['TableName']}")
            for item in params["TransactItems"]
            for kind in item
        ]
    raise Unmapped(f"no IAM mapping for dynamodb.{operation}: add it to {__name__}")


def _s3(operation: str, params: dict) -> list[Need]:
    bucket = f"arn:aws:s3:::{params['Bucket']}"
    if operation in _S3_OBJECT:
        plain, versioned = _S3_OBJECT[operation]
        found = [Need(versioned if params.get("VersionId") else plain, f"{bucket}/{params['Key']}")]
        if params.get("Tagging") and operation in ("PutObject", "CreateMultipartUpload"):
            found.append(Need("s3:PutObjectTagging", f"{bucket}/{params['Key']}"))
        return found
    if operation == "CopyObject":  # written where it goes, read where it comes from (at the version it names)
        source, key, version = _copy_source(params["CopySource"])
        found = [
            Need("s3:PutObject", f"{bucket}/{params['Key']}"),
            Need("s3:GetObjectVersion" if version else "s3:GetObject", f"arn:aws:s3:::{source}/{key}"),
        ]
        if params.get("Tagging"):  # tags written with the copy, as a tagged PutObject writes them
            found.append(Need("s3:PutObjectTagging", f"{bucket}/{params['Key']}"))
        return found
    if operation in _S3_BUCKET:
        context = {"s3:prefix": params["Prefix"]} if "Prefix" in params else {}
        return [Need(_S3_BUCKET[operation], bucket, context)]
    raise Unmapped(f"no IAM mapping for s3.{operation}: add it to {__name__}")


def _copy_source(source: dict | str) -> tuple[str, str, str | None]:
    """A copy's source (bucket, key, version): as the caller gave it, or as botocore has written it
    by the time the call is checked (``bucket/quoted-key?versionId=V``)."""
    if isinstance(source, dict):
        return source["Bucket"], source["Key"], source.get("VersionId")
    path, _, version = source.partition("?versionId=")
    bucket, _, key = unquote(path).partition("/")
    return bucket, key, version or None


def queue_arn(url: str, region: str) -> str:
    account, name = urlsplit(url).path.strip("/").split("/")[-2:]
    return f"arn:aws:sqs:{region}:{account}:{name}"
