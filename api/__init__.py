"""The HTTP API (FastAPI). Knows HTTP; the store knows nothing of it."""
