"""Token items: per-project API tokens, stored as digests (the token itself is shown once)."""

from .codec import TableItems, dump, load


class Tokens(TableItems):
    def put_token(self, digest: str, project: str, created_at: str) -> None:
        self.db.put_item(
            TableName=self.table,
            Item=dump({"pk": f"TOKEN#{digest}", "sk": "TOKEN", "project": project, "created_at": created_at}),
        )

    def token_project(self, digest: str) -> str | None:
        item = self.db.get_item(TableName=self.table, Key=dump({"pk": f"TOKEN#{digest}", "sk": "TOKEN"})).get("Item")
        return load(item)["project"] if item else None

    def delete_token(self, digest: str) -> bool:
        answer = self.db.delete_item(
            TableName=self.table, Key=dump({"pk": f"TOKEN#{digest}", "sk": "TOKEN"}), ReturnValues="ALL_OLD"
        )
        return "Attributes" in answer
