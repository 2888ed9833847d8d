"""The aggregator's use cases, one module each; handlers call exactly one of them. ``aggregator``
builds them on what a function's wiring made; the sweeper's one use case is built alone
(``sweeper_wiring``), so importing one use case loads no other."""
