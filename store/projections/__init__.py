"""Projections: query-ready views kept current from the event log."""
