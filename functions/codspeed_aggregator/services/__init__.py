"""What the use cases share, none of it a use case of its own: a run's snapshot and its shards'
summaries for a report, the sticky pull-request comment, which attempt of a run an upload goes to.
Each runs inside a use case, under that use case's function and role."""
