"""convo-store: an event-sourced conversation store for LLM agents."""
