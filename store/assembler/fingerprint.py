"""The stable prefix: everything before the special block, which a provider's
prefix cache can reuse from one build to the next.

The fingerprint is the sha256 of the deterministic JSON (sorted keys, no
whitespace) of the format name, the system prompt and the neutral messages
before the special block, as the provider will see them (bookkeeping fields
such as token estimates and client ids left out). Same prefix → same
fingerprint, whichever process built it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from store.assembler.diagnostics import StablePrefix
from store.messages import Message
from store.tokens import TokenCounter, estimate_message_tokens

# Only what a provider sees: a StoredMessage's seq, batch and timestamps (and
# our own bookkeeping) must not change the fingerprint of the same content.
_PROVIDER_FIELDS = set(Message.model_fields) - {
    "token_estimate",
    "client_message_id",
    "metadata",
    "agent_id",
}


def stable_prefix(
    *,
    format: str,
    system_prompt: str | None,
    prefix: Sequence[Message],
    count: TokenCounter,
) -> StablePrefix:
    document = {
        "format": format,
        "system": system_prompt,
        "messages": [m.model_dump(mode="json", include=_PROVIDER_FIELDS) for m in prefix],
    }
    encoded = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    tokens = sum(estimate_message_tokens(m, count) for m in prefix)
    if system_prompt is not None:
        tokens += count(system_prompt)
    return StablePrefix(
        fingerprint=hashlib.sha256(encoded.encode()).hexdigest(),
        tokens=tokens,
        message_count=len(prefix) + (system_prompt is not None),
    )
