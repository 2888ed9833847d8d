"""The base of every wire model."""

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """A wire model's validator is built when it is first used, not at import: a function's cold start
    loads every model its modules name, and a call uses a few (bench/cold_start.py: 20 to 45 ms less to
    import, the first invocation no slower)."""

    model_config = ConfigDict(defer_build=True)
