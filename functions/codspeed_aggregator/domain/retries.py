"""How long a message that failed waits before SQS hands it out again."""

from codspeed_rules.backoff import backoff


def redelivery_delay(receive_count: int) -> int:
    """1, 2, 4 ... minutes, at most 15, before a failed message is tried again (the queues'
    visibility timeout, long enough for a whole merge, would be 90 minutes)."""
    return int(backoff(receive_count - 1, 60, 900, jitter=False))
