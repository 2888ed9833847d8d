"""Wire contracts shared by the client and the aggregator: one pydantic model each."""
