"""The live web monitor of the fleet (`collector monitor`): a process of its own that reads MongoDB and pushes the
fleet, its rates and its work to every open page once a second. See docs/monitor.md."""
