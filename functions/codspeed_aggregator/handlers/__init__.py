"""Lambda entry points: parse the event, call one use case, shape the answer. Tracing is Lambda's own
(template.yaml's ``Tracing: Active``): each invocation is traced, without the X-Ray SDK's 180 ms at
every cold start (and without its subsegment for each AWS call)."""
