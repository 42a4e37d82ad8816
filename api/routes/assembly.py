"""Assembly: the provider request body of an agent's next LLM call."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS
from api.routing import JSONRoute
from api.schemas import Assembled, AssembleRequest, ConversationIdPath
from store.assembler import AssembleOptions

router = APIRouter(prefix="/conversations", tags=["assembly"], route_class=JSONRoute)

# Options that hold code, not data: they cannot come from JSON.
NOT_FROM_JSON = frozenset({"token_counter"})

_ASSEMBLED = TypeAdapter(Assembled)


def encoded(assembled: Assembled) -> bytes:
    """The response's JSON: the payload by orjson, a fifth of pydantic's
    time for a large payload and the same bytes (docs/http-api.md, "Speed");
    a payload orjson cannot write (an integer past 64 bits, nesting past its
    limit) by pydantic, as before."""
    try:
        return orjson.dumps(
            {
                "payload": assembled.payload,
                "diagnostics": orjson.Fragment(assembled.diagnostics.model_dump_json()),
            }
        )
    except orjson.JSONEncodeError:
        return _ASSEMBLED.dump_json(assembled)


def assemble_options(raw: dict[str, Any]) -> AssembleOptions:
    """The assembler's options from the request's `options` object, or a 422
    naming the offending option."""
    location = ("body", "options")
    refused = sorted(NOT_FROM_JSON & raw.keys())
    if refused:
        raise RequestValidationError(
            [
                {"loc": (*location, name), "msg": "cannot be set over HTTP", "type": "value_error"}
                for name in refused
            ]
        )
    try:
        return AssembleOptions.model_validate(raw)
    except ValidationError as error:
        raise RequestValidationError(
            [{**e, "loc": (*location, *e["loc"])} for e in error.errors()]
        ) from None


@router.post(
    "/{conversation_id}/assemble",
    summary="Assemble the payload of an agent's next LLM call",
    operation_id="assemblePayload",
    response_model=Assembled,
    responses=CONVERSATION_ERRORS,
)
async def assemble(
    conversation_id: ConversationIdPath, body: AssembleRequest, repository: RepositoryDep
) -> Response:
    """Build the request body for `format` from the agent's visible window and
    its slots as they are now, with diagnostics (special block placement,
    repairs, token estimate, stable-prefix fingerprint)."""
    options = assemble_options(body.options)
    assembly = await repository.assemble(
        conversation_id,
        agent_id=body.agent_id,
        format=body.format,
        options=options,
    )
    assembled = Assembled(payload=assembly.payload, diagnostics=assembly.diagnostics)
    return Response(encoded(assembled), media_type="application/json")
