"""The operator's room: `collector status` and the `collector networks` commands, reading and steering the
collections from outside a running collector (docs/ARCHITECTURE.md, "Rooms"). What they print and the exit codes
are the command line's (collector/cli/)."""

# the states `networks list --state` filters by (networks.py `state_filter`): here, so that the command line's
# parser is built without loading the store
STATES = ("due", "leased", "rateLimit", "disabled", "unauthorized", "erroring", "skipped")
