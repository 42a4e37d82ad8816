"""`store.domain.json_text` writes what `json.dumps(..., sort_keys=True)` writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.domain.json_text import sorted_json

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, database=None)
@given(value=json_values, ensure_ascii=st.booleans(), compact=st.booleans())
def test_the_text_is_json_dumps_text(value: Any, ensure_ascii: bool, compact: bool) -> None:
    separators = (",", ":") if compact else (", ", ": ")
    dumps = sorted_json(ensure_ascii=ensure_ascii, separators=separators)
    expected = json.dumps(value, sort_keys=True, ensure_ascii=ensure_ascii, separators=separators)
    assert dumps(value) == expected


def test_what_json_cannot_hold_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        sorted_json()({"a": {1, 2}})
