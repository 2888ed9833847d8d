"""Lambda entry points: parse the event, call one use case, shape the answer."""
