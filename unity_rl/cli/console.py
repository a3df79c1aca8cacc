"""Log lines of the ``unity-rl`` command on the terminal: on stderr, as ``[LEVEL] message``,
never sharing a line with the live progress line that ``MetricsWriter`` redraws on stdout."""
from __future__ import annotations

import logging
import sys


class _ConsoleHandler(logging.StreamHandler):
    """Log lines on stderr; on a terminal, first erases the live progress line that
    MetricsWriter redraws on stdout, so that the two never share a line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if sys.stdout.isatty():
                sys.stdout.write("\r\033[K")
                sys.stdout.flush()
        except (OSError, ValueError, AttributeError):
            pass
        super().emit(record)


def setup_logging(debug: bool) -> None:
    """Console logging for the run: INFO, or DEBUG with ``debug``."""
    handler = _ConsoleHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, handlers=[handler])
