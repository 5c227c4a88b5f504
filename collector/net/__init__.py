"""The wire: what the collectors' and the sinks' HTTP clients share, importing only the kernel."""
