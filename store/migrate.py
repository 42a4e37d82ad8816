"""Running alembic from code: `upgrade`, `downgrade`, `current`."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

import migrations

SCRIPT_LOCATION = Path(migrations.__file__).parent


def alembic_config(engine: Engine | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if engine is not None:
        config.attributes["engine"] = engine
    return config


def _with_connection(engine: Engine, action: str, revision: str) -> None:
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        getattr(command, action)(config, revision)


def upgrade(engine: Engine, revision: str = "head") -> None:
    _with_connection(engine, "upgrade", revision)


def downgrade(engine: Engine, revision: str) -> None:
    _with_connection(engine, "downgrade", revision)


def heads() -> list[str]:
    return list(ScriptDirectory.from_config(alembic_config()).get_heads())
