"""The standard `process_*` metrics, read only from what the shipped unit's sandbox leaves visible.

prometheus_client's ProcessCollector needs the boot time from `/proc/stat`; under `ProcSubset=pid` (the unit's
setting) that file is hidden, and the library then exports no `process_*` series at all — the memory alert could
never fire. This collector reads `/proc/self/stat` (per process, visible under `subset=pid`), takes the boot time
from CLOCK_BOOTTIME instead of `/proc/stat`, counts `/proc/self/fd` and asks `resource` for the descriptor limit
and, when `/proc/self` itself is unreadable, for CPU time and peak memory. Names, types and units are the ones
prometheus_client's own collector uses.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterable

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

PAGE = resource.getpagesize()
TICKS = os.sysconf("SC_CLK_TCK") if "SC_CLK_TCK" in os.sysconf_names else 100
STARTED = time.time()  # the fallback start time: when this module was imported


def boot_time() -> float:
    """Unix time of the boot, without /proc/stat: now minus the time since boot."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


class SandboxProcessCollector(Collector):
    def __init__(self, proc: str = "/proc/self", registry: CollectorRegistry | None = None):
        self.proc = proc
        if registry is not None:
            registry.register(self)

    def stat(self) -> list[bytes] | None:
        """The fields of /proc/self/stat after the command name (field 3 onwards), or None."""
        try:
            with open(os.path.join(self.proc, "stat"), "rb") as f:
                return f.read().rsplit(b")", 1)[-1].split()
        except OSError:
            return None

    def values(self) -> dict[str, float]:
        out: dict[str, float] = {}
        parts = self.stat()
        if parts is not None and len(parts) > 21:
            out["cpu"] = (int(parts[11]) + int(parts[12])) / TICKS
            out["start"] = int(parts[19]) / TICKS + boot_time()
            out["vsize"] = float(parts[20])
            out["rss"] = float(parts[21]) * PAGE
        else:  # no /proc/self at all: what the kernel tells the process about itself
            usage = resource.getrusage(resource.RUSAGE_SELF)
            out["cpu"] = usage.ru_utime + usage.ru_stime
            out["start"] = STARTED
            out["rss"] = float(usage.ru_maxrss) * 1024  # the peak: the best there is without /proc
        try:
            out["fds"] = float(len(os.listdir(os.path.join(self.proc, "fd"))))
        except OSError:
            pass
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        out["max_fds"] = float(soft) if soft != resource.RLIM_INFINITY else float("inf")
        return out

    def collect(self) -> Iterable[Metric]:
        v = self.values()
        yield CounterMetricFamily("process_cpu_seconds", "Total user and system CPU time spent in seconds.", v["cpu"])
        yield GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.", v["rss"])
        if "vsize" in v:
            yield GaugeMetricFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", v["vsize"])
        yield GaugeMetricFamily(
            "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", v["start"]
        )
        if "fds" in v:
            yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.", v["fds"])
        yield GaugeMetricFamily("process_max_fds", "Maximum number of open file descriptors.", v["max_fds"])
