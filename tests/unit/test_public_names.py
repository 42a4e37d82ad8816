"""`store`'s public names: everything it imports is in `__all__`, and
every name in `__all__` is the very object its home module defines."""

from __future__ import annotations

import importlib

import store


def test_all_lists_every_name_the_package_imports() -> None:
    public = {name for name in vars(store) if not name.startswith("_")}
    submodules = {name for name, value in vars(store).items() if type(value) is type(importlib)}
    assert public - submodules == set(store.__all__)


def test_each_public_name_is_its_home_modules_object() -> None:
    for name in store.__all__:
        value = getattr(store, name)
        home = getattr(value, "__module__", None)
        if home is not None and home.startswith("store."):
            assert getattr(importlib.import_module(home), name, value) is value
