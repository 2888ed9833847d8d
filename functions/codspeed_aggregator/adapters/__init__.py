"""Small named adapters: every AWS and HTTP call the aggregator makes goes through one of these."""
