"""Projection tables (filled in by the projections issue)."""

from __future__ import annotations
