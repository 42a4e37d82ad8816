"""Which summarizer a compaction job uses, by name: what `convo compact
--summarizer` and the `summarizer` field of `POST /compactions` choose.

- `extractive` (default): `ExtractiveSummarizer`, offline, no model;
- `openai-compatible`: `OpenAICompatibleSummarizer`, a model behind any
  OpenAI-compatible endpoint, configured by the settings
  (`CONVO_SUMMARIZER_URL`, `CONVO_SUMMARIZER_MODEL`,
  `CONVO_SUMMARIZER_API_KEY`, `CONVO_SUMMARIZER_TIMEOUT_S`). Asked for
  without a URL and a model, it is a configuration error naming them.
"""

from __future__ import annotations

from typing import Literal

from store.compaction.summarizer import ExtractiveSummarizer, Summarizer
from store.domain.errors import ConfigurationError

SummarizerName = Literal["extractive", "openai-compatible"]
SUMMARIZER_NAMES: tuple[SummarizerName, ...] = ("extractive", "openai-compatible")


def make_summarizer(
    name: str,
    *,
    url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
) -> Summarizer:
    """The summarizer called `name`, configured with the given endpoint."""
    if name == "extractive":
        return ExtractiveSummarizer()
    if name != "openai-compatible":
        raise ConfigurationError(
            f"unknown summarizer {name!r}; expected one of: {', '.join(SUMMARIZER_NAMES)}"
        )
    if not url or not model:
        missing = [
            variable
            for variable, value in (
                ("CONVO_SUMMARIZER_URL", url),
                ("CONVO_SUMMARIZER_MODEL", model),
            )
            if not value
        ]
        raise ConfigurationError(
            "the openai-compatible summarizer needs " + " and ".join(missing) + " to be set"
        )
    # Imported here: it needs httpx, which `store.compaction` does not.
    from store.compaction.openai_compatible import OpenAICompatibleSummarizer

    return OpenAICompatibleSummarizer(base_url=url, model=model, api_key=api_key, timeout=timeout)
