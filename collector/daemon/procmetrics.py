"""The standard `process_*` metrics, read only from what the shipped unit's sandbox leaves visible.

prometheus_client's ProcessCollector needs the boot time from `/proc/stat`; under `ProcSubset=pid` (the unit's
setting) that file is hidden, and the library then exports no `process_*` series at all — the memory alert could
never fire. This collector reads `/proc/self/stat` (per process, visible under `subset=pid`), takes the boot time
from CLOCK_BOOTTIME instead of `/proc/stat`, counts `/proc/self/fd` and asks `resource` for the descriptor limit
and, when `/proc/self` itself is unreadable, for CPU time and peak memory. Names, types and units are the ones
prometheus_client's own collector uses. `usage()` reads the same two figures (resident memory, CPU time) for the
heartbeat's stats beat.
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


def read_stat(proc: str = "/proc/self") -> list[bytes] | None:
    """The fields of /proc/self/stat after the command name (field 3 onwards), or None."""
    try:
        with open(os.path.join(proc, "stat"), "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None


def usage_of(parts: list[bytes] | None) -> tuple[int, float]:
    """(resident bytes, CPU seconds, user and system) from the stat fields; without them (no /proc/self) what the
    kernel tells the process about itself, the peak resident size being the best there is."""
    if parts is not None and len(parts) > 21:
        return int(parts[21]) * PAGE, (int(parts[11]) + int(parts[12])) / TICKS
    rusage = resource.getrusage(resource.RUSAGE_SELF)
    return int(rusage.ru_maxrss) * 1024, rusage.ru_utime + rusage.ru_stime


def usage(proc: str = "/proc/self") -> tuple[int, float]:
    """This process's (resident bytes, CPU seconds), read the way the unit's sandbox allows."""
    return usage_of(read_stat(proc))


class SandboxProcessCollector(Collector):
    def __init__(self, proc: str = "/proc/self", registry: CollectorRegistry | None = None):
        self.proc = proc
        if registry is not None:
            registry.register(self)

    def stat(self) -> list[bytes] | None:
        return read_stat(self.proc)

    def values(self) -> dict[str, float]:
        parts = self.stat()
        rss, cpu = usage_of(parts)
        out: dict[str, float] = {"cpu": cpu, "rss": float(rss), "start": STARTED}
        if parts is not None and len(parts) > 21:
            out["start"] = int(parts[19]) / TICKS + boot_time()
            out["vsize"] = float(parts[20])
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
