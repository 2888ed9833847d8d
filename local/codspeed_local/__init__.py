"""The embedded local stack: the same handlers on moto's server, without Docker."""
