"""CI jobs' archives: one item a Buildkite job, the MD5 of the archive its upload URL first took."""

from botocore.exceptions import ClientError

from .codec import JOB_PREFIX, TableItems, condition_failed, dump, run_pk


class CiJobs(TableItems):
    def claim(self, project: str, run_id: str, job: str, md5: str | None) -> bool:
        """A CI job's archive (its MD5) noted for the run: False when the job noted another before
        (the same archive again is a retried POST of the same job)."""
        item = {"pk": run_pk(project, run_id), "sk": f"{JOB_PREFIX}{job}", "md5": md5, "expires_at": self.expires_at()}
        try:
            self.db.put_item(
                TableName=self.table,
                Item=dump(item),
                ConditionExpression="attribute_not_exists(pk) OR md5 = :md5",
                ExpressionAttributeValues=dump({":md5": md5}),
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True
