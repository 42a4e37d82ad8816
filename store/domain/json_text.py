"""JSON text with sorted keys, as `json.dumps(..., sort_keys=True)` writes it,
for the small documents encoded once per message at every payload build
(tool call arguments, for the provider and for the token estimate).

`json.JSONEncoder.encode` builds a new C encoder at every call; for a
small arguments object that set-up costs as much as the encoding
(docs/storage.md, "Why the hot paths are written by hand"), and a build
encodes each tool call's arguments twice. These functions build theirs
once. The text is the same,
byte for byte: it is the encoder `JSONEncoder.encode` uses, with the same
settings. Without the C speedups (another Python), they are
`JSONEncoder.encode`.

No circular-reference check: what is encoded here was parsed from JSON or
validated as JSON values, which have no cycles (a cycle would end in
RecursionError rather than ValueError).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _encoder
from typing import Any


def _default(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def sorted_json(
    *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")
) -> Callable[[Any], str]:
    """A `json.dumps(value, sort_keys=True, ensure_ascii=..., separators=...)`."""
    item_separator, key_separator = separators
    # The C parts `JSONEncoder.iterencode` uses (not in the type stubs).
    make: Any = getattr(_encoder, "c_make_encoder", None)
    escape: Any = getattr(
        _encoder, "c_encode_basestring_ascii" if ensure_ascii else "c_encode_basestring", None
    )
    if make is None or escape is None:
        return json.JSONEncoder(
            sort_keys=True, ensure_ascii=ensure_ascii, separators=separators
        ).encode
    # markers, default, string escape, indent, separators, sort_keys, skipkeys, allow_nan
    encode = make(None, _default, escape, None, key_separator, item_separator, True, False, True)

    def dumps(value: Any) -> str:
        return "".join(encode(value, 0))

    return dumps
