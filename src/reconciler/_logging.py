"""Log output for operators built on the engine: text for a terminal, JSON lines for a log
pipeline (the reference's default), and the object a controller is reconciling on every line
logged while it does, so one object's story can be filtered out of a busy operator's logs."""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TextIO

from reconciler._objects import Request

FORMATS = ("json", "text")
LEVELS = ("debug", "info", "warning", "error")

# (controller name, request) while a controller's reconcile runs; each worker is its own task,
# so concurrent reconciles never see each other's.
_reconciling: ContextVar[tuple[str, Request] | None] = ContextVar("reconciling", default=None)


@contextlib.contextmanager
def reconciling(controller: str, request: Request) -> Iterator[None]:
    """Name `request` (and the controller) on every line logged inside the block."""
    token = _reconciling.set((controller, request))
    try:
        yield
    finally:
        _reconciling.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts (UTC, ISO 8601), level, logger, msg, and `controller`,
    `namespace`, `name` while a reconcile runs (`kind`, `object` when passed in `extra`)."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        line: dict[str, object] = {
            "ts": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        current = _reconciling.get()
        if current is not None:
            controller, request = current
            line["controller"] = controller
            if request.namespace:
                line["namespace"] = request.namespace
            line["name"] = request.name
        # `extra={"kind": ..., "object": "ns/name"}` names an object outside a reconcile
        # (a LogRecord's own `name` is the logger's).
        for key in ("kind", "object"):
            value = getattr(record, key, None)
            if isinstance(value, str) and value:
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """`time level logger: message`, with `[controller ns/name]` while a reconcile runs."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        current = _reconciling.get()
        if current is None:
            return text
        controller, request = current
        ref = f"{request.namespace}/{request.name}" if request.namespace else request.name
        return f"{text} [{controller} {ref}]"


def configure_logging(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Send every logger's records at `level` and above to `stream` (stderr) in `fmt`."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
