"""The operator's room: `collector status` and the `collector networks` commands, reading and steering the
collections from outside a running collector (docs/ARCHITECTURE.md, "Rooms")."""
