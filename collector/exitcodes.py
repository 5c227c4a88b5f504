"""Exit codes, the same for every command (docs/operating.md): 0 done; 1 the command ran and the answer is no
(no such network, a network a collector holds left alone, a write that matched nothing, a run that failed, an
unhealthy instance, a --once pass that failed); 2 usage or settings; 3 MongoDB cannot be reached.
`status --check` follows the monitoring-plugin convention instead (ops/status.py): 0 OK, 1 WARNING, 2 CRITICAL,
3 UNKNOWN."""

EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_DATABASE = 0, 1, 2, 3
