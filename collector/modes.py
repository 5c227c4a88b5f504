"""A network's modes (its `mode` field), named once for the engine, the operator tools, the command line and connectors.

A run works in `initial` (walking the history) or `normal` (polling for what is new); a network the API rate-limits
waits in `rateLimit` and resumes its previous mode (`prevMode`). The initial collector serves initial and rateLimit
networks.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """A network's mode (the `mode` field). The initial collector serves initial and rateLimit networks."""

    INITIAL = "initial"
    NORMAL = "normal"
    RATE_LIMIT = "rateLimit"


MODES = (Mode.INITIAL, Mode.NORMAL)  # the modes a run works in, and a collector serves
