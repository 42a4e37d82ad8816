"""The domain: values, events and the decisions made on them, with no I/O.

Messages and their parts, the events of the log, batch operations, the
decisions a write makes (`commands`), the visible window's rules
(`window`), the projector that turns recorded events into the views'
changes (`projector`), and the query values of listing, search and the
feed. Everything above (the assembler, the repository, the backends)
imports from here; nothing here imports from them.
"""
