"""The numbered provider rules of `provider-rules.md`, one module per format.
Each module's `check(payload)` returns the violations it finds."""
