"""Pydantic models built from data that was validated before (when it was
written), without validating it again.

`model_construct` does that, but it works out every field's default on
every call; `Constructor` works them out once per model, which is what a
session of thousands of events read back needs. `checkers` says which
fields' JSON values are already what validation would make of them (a
string for a `str`, a JSON object for a `dict[str, Any]`, ...): the others
must be validated.
"""

from __future__ import annotations

from collections.abc import Callable
from types import UnionType
from typing import Any, Generic, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
Check = Callable[[Any], bool]

_FACTORY = object()  # a field whose default comes from its factory, per instance
_set = object.__setattr__


class Constructor(Generic[M]):
    """Builds `model` instances from field values, as `model_construct`
    does: unset fields get their defaults, the set ones are the instance's
    fields set, `model_post_init` runs."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.template: dict[str, Any] = {}
        self.factories: dict[str, Callable[[], Any]] = {}
        self.simple = (
            not model.__private_attributes__ and model.model_config.get("extra") != "allow"
        )
        for name, field in model.model_fields.items():
            if field.default_factory is not None:
                if field.default_factory_takes_validated_data:
                    self.simple = False
                self.factories[name] = field.default_factory  # type: ignore[assignment]
                self.template[name] = _FACTORY
            elif not field.is_required():
                default = field.default
                if type(default) in (list, dict, set):
                    self.simple = False  # each instance needs its own copy
                self.template[name] = default
        self.post_init = model.__pydantic_post_init__ is not None

    def __call__(self, **values: Any) -> M:
        if not self.simple:
            return self.model.model_construct(**values)
        fields = self.template.copy()
        for name, factory in self.factories.items():
            if name not in values:
                fields[name] = factory()
        fields.update(values)
        built = self.model.__new__(self.model)
        _set(built, "__dict__", fields)
        _set(built, "__pydantic_fields_set__", set(values))
        _set(built, "__pydantic_extra__", None)
        _set(built, "__pydantic_private__", None)
        if self.post_init:
            built.model_post_init(None)
        return built


def checker(annotation: Any) -> Check | None:
    """How to tell that a JSON value is already what a field of this type
    validates to; None for a type whose values must be validated."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, UnionType) and len(args) == 1:
        inner = checker(args[0])
        return None if inner is None else (lambda v: v is None or inner(v))
    if annotation is Any:
        return lambda v: True
    if annotation in (str, bool, int, float):
        return lambda v: type(v) is annotation
    if get_origin(annotation) is dict:
        value_check = checker(get_args(annotation)[1])
        return lambda v: (
            type(v) is dict
            and (not v or (value_check is not None and all(value_check(x) for x in v.values())))
        )
    if get_origin(annotation) is list:
        item_check = checker(get_args(annotation)[0])
        if item_check is not None:
            return lambda v: type(v) is list and all(item_check(x) for x in v)
    return None


def checkers(model: type[BaseModel]) -> dict[str, Check]:
    """The fields of `model` whose JSON values need no validation, each with its check."""
    found = {name: checker(field.annotation) for name, field in model.model_fields.items()}
    return {name: check for name, check in found.items() if check is not None}


def plain(data: Any, fields: dict[str, Check]) -> bool:
    """Whether `data` is a JSON object of such fields only, each passing its check."""
    return type(data) is dict and all(k in fields and fields[k](v) for k, v in data.items())
