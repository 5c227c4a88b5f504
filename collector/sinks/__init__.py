"""Sinks: new items, once stored, handed to destinations (search indexes, webhooks), at least once and idempotent by
the item's `_id`, by the sink service (`collector sink`), a process of its own.

The item is its own outbox: every collector inserts it with `sinkPending: true` (engine/run.py). The modules:
sdk (what a sink implements), registry (kinds of sink by the `likeastore.sinks` entry points), config (each sink's
SINK_<NAME>_* settings), docs (an item as a destination receives it), store (the sinks' collections; also what the
operator's commands use), mover (marked items into the queue), backfill (walks over stored items, paced), delivery
(one batch on a worker thread: splitting, verdicts, back-off), lane (one sink's threads and flights), outcomes (the
verdicts written), figures (stats and the metrics' figures), service (SinkService: one round at a time)."""
