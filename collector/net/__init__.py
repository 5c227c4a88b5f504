"""The wire: what the collectors, the sinks, the metrics port and the monitor share to speak HTTP, importing only
the kernel."""
