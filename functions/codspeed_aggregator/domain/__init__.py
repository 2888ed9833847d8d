"""Pure domain logic: no AWS, no Lambda events."""
