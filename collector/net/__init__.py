"""The wire: what the collectors, the sinks, the metrics port and the monitor share to speak HTTP/1.1 safely.
It imports only the kernel (collector/*.py); the error types it raises live with it (errors.py)."""
