"""The substring index's grams (store.postgres.search_grams): the code's
SQL is the SQL migration 0020 installs."""

from __future__ import annotations

import importlib

from store.postgres.search_grams import grams_function, grams_query_function


def test_migration_0020_installs_the_codes_grams() -> None:
    # The rule's one home is store.postgres.search_grams; 0020 keeps its SQL
    # as released. Changing the rule needs a migration that installs it.
    released = importlib.import_module("migrations.versions.0020_search_substring_grams")
    assert grams_function("{schema}") == released.GRAMS_FUNCTION
    assert grams_query_function("{schema}") == released.GRAMS_QUERY_FUNCTION
