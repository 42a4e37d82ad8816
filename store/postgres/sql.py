"""Where the PostgreSQL storage's statements are, and the ones whose plans
are checked by name.

Each statement is named, and lives beside the code that runs it:

- what they share (the conversation's row, a message's columns, a batch's
  member sources): `shared_sql`;
- the stream lock, what a decision asks under it, a purge: `write_session`;
- an append in one statement, plain or guarded: `append_sql`;
- the other projection steps, and a write as statements: `write_statements`;
- a fork's reads and its copy: `forks`;
- a rebuild: `rebuild`;
- windows: `window_sql`;
- a role's messages, history pages: `history_sql`;
- the other reads of one conversation, its events: `reads`;
- a tenant's conversations: `listing`;
- the feed, a tenant's feed, changed conversations: `feed`;
- search: `search`, `search_indexes`;
- compaction candidates, claims: `candidates`.

The statements below are those whose plans matter most at scale — a
window, a role's messages, a history page, what a batch operation reads
and copies, a listing page — under the names the plan tests
(`tests/integration/test_listing_plans.py`, `test_stale_statistics.py`,
`test_projections.py`) EXPLAIN them by.
"""

from store.postgres.history_sql import history, recent_in_history, role_range
from store.postgres.listing import page_statement as list_conversations
from store.postgres.shared_sql import NO_SEQ_ABOVE
from store.postgres.window_sql import (
    AGENT_WINDOW,
    ASSEMBLY_WINDOW,
    CONVERSATION_OF_AGENT,
    COUNT_IN_WINDOW,
    recent_in_window,
)
from store.postgres.write_session import MESSAGES_WRITTEN_BY, WINDOW_ENTRIES
from store.postgres.write_statements import COPY_MEMBERS

__all__ = [
    "AGENT_WINDOW",
    "ASSEMBLY_WINDOW",
    "CONVERSATION_OF_AGENT",
    "COPY_MEMBERS",
    "COUNT_IN_WINDOW",
    "MESSAGES_WRITTEN_BY",
    "NO_SEQ_ABOVE",
    "WINDOW_ENTRIES",
    "history",
    "list_conversations",
    "recent_in_history",
    "recent_in_window",
    "role_range",
]
