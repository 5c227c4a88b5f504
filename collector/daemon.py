"""The long-running loop for one mode: pass, pause (short after work, longer when idle), repeat.

First SIGTERM/SIGINT: networks in flight finish (their requests are cut after HTTP_TIMEOUT at most) and are
saved, claimed networks not started are given back, then the loop exits 0.
A second signal exits at once. With once=True: one pass, exit 1 if that pass failed as a whole.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from .engine import Collector

log = logging.getLogger("collector.daemon")


class Daemon:
    def __init__(self, collector: Collector, mode: str):
        self.collector = collector
        self.mode = mode
        self.stopping = threading.Event()
        self.signals = 0

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)

    def on_signal(self, signum: int, frame=None) -> None:
        self.signals += 1
        if self.signals > 1:
            sys.stderr.write(f"collector: second {signal.Signals(signum).name}, exiting now\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        log.info(
            "%s received: finishing the networks in flight (at most %gs), then exiting",
            signal.Signals(signum).name,
            self.collector.settings.http_timeout,
        )
        self.stopping.set()
        # requests still running after one deadline are cut and no new one starts: the stop is bounded
        self.collector.http.interrupt_after(self.collector.settings.http_timeout)

    def run(self, once: bool = False) -> int:
        settings = self.collector.settings
        log.info("collector %s started", self.mode)
        failed = False
        while not self.stopping.is_set():
            pause = settings.loop_idle_pause
            try:
                report = self.collector.run_pass(self.mode, should_stop=self.stopping.is_set)
                failed = False
            except Exception:  # a failed pass (database down, say) is logged; the loop goes on
                failed = True
                log.exception("pass failed; next try in %gs", pause)
            else:
                if report.tasks:
                    pause = settings.loop_busy_pause
                else:
                    self.collector.observers.notify("on_idle", self.mode)
            if once:
                break
            self.stopping.wait(pause)
        log.info("collector %s stopped", self.mode)
        return 1 if once and failed else 0
