"""The assembler: stored messages + agent profile + context slots + options →
the exact request payload for an LLM provider, with diagnostics. Pure
functions; no database, no network.

    from store.assembler import assemble, AssembleOptions, ProviderFormat
    assembly = assemble(messages, profile=profile, slots=slots, format="anthropic")
    assembly.payload, assembly.diagnostics
"""

from store.assembler.assemble import Assembly, assemble, parse_format
from store.assembler.diagnostics import (
    BudgetTrim,
    Diagnostics,
    Repair,
    RepairKind,
    SpecialBlockPlacement,
    StablePrefix,
    ToolResultClipping,
)
from store.assembler.errors import EmptyWindow
from store.assembler.formats.xml_parser import parse_tool_calls
from store.assembler.formats.xml_tools import render_result, render_tool_calls
from store.assembler.options import (
    DEFAULT_N,
    DEFAULT_XML_FINAL_INSTRUCTION,
    AssembleOptions,
    PlacementPolicy,
    ProviderFormat,
    ReminderStyle,
)
from store.assembler.placement import special_block_index
from store.assembler.plain import assemble_stored
from store.assembler.rules.violation import Violation
from store.assembler.special_block import render_todo, special_block
from store.assembler.validate import InvalidPayload, ensure_valid, validate

__all__ = [
    "DEFAULT_N",
    "DEFAULT_XML_FINAL_INSTRUCTION",
    "AssembleOptions",
    "Assembly",
    "BudgetTrim",
    "Diagnostics",
    "EmptyWindow",
    "InvalidPayload",
    "PlacementPolicy",
    "ProviderFormat",
    "ReminderStyle",
    "Repair",
    "RepairKind",
    "SpecialBlockPlacement",
    "StablePrefix",
    "ToolResultClipping",
    "Violation",
    "assemble",
    "assemble_stored",
    "ensure_valid",
    "parse_format",
    "parse_tool_calls",
    "render_result",
    "render_todo",
    "render_tool_calls",
    "special_block",
    "special_block_index",
    "validate",
]
