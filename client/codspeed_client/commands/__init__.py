"""The client's commands, one module each: its flags (``add_arguments``) and what it does (``run``).
They import what they send with inside ``run``, so ``--help`` loads neither requests nor pydantic."""

from __future__ import annotations

from . import close, durations, env, open_run, pack, plan, push, split, status

COMMANDS = (push, open_run, plan, durations, split, close, status, env, pack)
