"""Text for a terminal or a text log line, whatever it came from: every character that could drive a terminal
or forge a line — C0 and C1 controls (newline, CR, ESC, NUL, DEL), Unicode format characters (bidi overrides,
zero-width marks), line and paragraph separators — is written as a visible escape (`\\n`, `\\x1b`, `\\u202e`),
and a backslash as `\\\\`, so the form is reversible (Python's `unicode_escape` reads it back) and one record is
always one line.
"""

from __future__ import annotations

import logging
import time
from typing import Any

SAFE = frozenset(" ")  # the one space character kept as it is


def printable(text: str) -> str:
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable() or ch in SAFE:
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


class EscapingFormatter(logging.Formatter):
    """A text log formatter whose records are one line each: the message escaped (`printable`), and a
    traceback's lines (which may quote text from outside in their last line) escaped too and indented, so no
    continuation line can pass for a record of its own."""

    second: tuple[int, str] = (-1, "")  # the last second formatted, and its text

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """As logging's, the text of a second made once for all the records of that second (`time.strftime` for
        each record was a tenth of a run line's formatting)."""
        if datefmt or self.converter is not time.localtime:
            return super().formatTime(record, datefmt)
        whole = int(record.created)
        second, text = self.second
        if second != whole:
            text = time.strftime(self.default_time_format, time.localtime(whole))
            self.second = (whole, text)
        return self.default_msec_format % (text, record.msecs) if self.default_msec_format else text

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return "\n".join("  " + printable(line) for line in super().formatException(ei).splitlines())

    def formatStack(self, stack_info: str) -> str:
        return "\n".join("  " + printable(line) for line in stack_info.splitlines())
