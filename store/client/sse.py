"""Reading the feed's Server-Sent Events (`GET /events/stream`).

The service sends each event as `id: <checkpoint>`, `event: <type>`,
`data: <the event as JSON>` and a blank line, and when quiet a heartbeat
comment followed by an `id:` line alone, which moves the resume point
without an event (api/routes/events.py). This reads the lines as the SSE
specification says (`data` lines joined, comments and unknown fields
ignored, an `id` remembered even without data), so a reconnect sends the
last id as `Last-Event-ID` and misses nothing.
"""

from __future__ import annotations

from store.domain.feed import FeedEvent


class EventStreamReader:
    """Turns the stream's lines into feed events; `last_id` is the resume point."""

    def __init__(self, last_id: str | None = None) -> None:
        self.last_id = last_id
        self._data: list[str] = []

    def line(self, line: str) -> FeedEvent | None:
        """Read one line (without its line break); the event it completes, if any."""
        if not line:
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return FeedEvent.model_validate_json(data)
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "id" and "\x00" not in value:
            self.last_id = value
        return None
