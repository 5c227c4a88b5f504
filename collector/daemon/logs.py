"""Logging for the process: one handler on standard error, every record redacted (sdk.redaction) and, in the text
format, escaped to one line (textout); `LOG_FORMAT=json` writes one strict ASCII JSON object per line."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from ..textout import EscapingFormatter


def setup_logging(level: str, log_format: str = "text") -> None:
    from ..sdk.redaction import RedactingFilter, install

    install()  # every record redacted when made, whoever logs it
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        json_formatter()
        if log_format == "json"
        else EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handler.addFilter(RedactingFilter())  # and on the handler, for records made before install()
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    uncollected()
    # APScheduler's INFO lines ("Running job", "executed successfully") and its warnings (a skip, a miss) would
    # repeat what collector.jobs logs, rate-limited, only when it matters
    logging.getLogger("apscheduler").setLevel(max(logging.ERROR, root.level))


def uncollected() -> None:
    """What no line of ours shows is not collected for each record, as the logging HOWTO's "Optimization" section
    says: where the call was made (a walk up the stack), the thread, the process (~a tenth of a run line's cost)."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def json_formatter() -> logging.Formatter:
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and a run line's fields."""
    from datetime import UTC, datetime

    from pythonjsonlogger.json import JsonFormatter

    from ..sdk.redaction import redact

    class Formatter(JsonFormatter):
        def add_fields(self, log_record: dict, record: logging.LogRecord, message_dict: dict) -> None:
            super().add_fields(log_record, record, message_dict)
            log_record["time"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            log_record["level"] = record.levelname
            log_record["logger"] = record.name
            run = log_record.pop("run", None)
            if isinstance(run, dict):
                log_record.update({k: redact(v) if isinstance(v, str) else v for k, v in run.items()})

    return Formatter("%(message)s", json_ensure_ascii=True, json_serializer=strict_json)


def strict_json(value: Any, **options: Any) -> str:
    """RFC 8259 only: NaN and the infinities (a float from a document or a server) become null."""
    from ..jsonout import plain

    options.pop("allow_nan", None)
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(plain(value), allow_nan=False, **options)
