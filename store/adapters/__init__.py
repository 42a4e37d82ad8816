"""Adapters that let agent frameworks keep their history in convo-store.

- `store.adapters.openai_agents.ConvoSession`: the OpenAI Agents SDK
  `Session` protocol (extra `convo-store[openai-agents]`).
- `store.adapters.langchain.ConvoChatMessageHistory`: LangChain's
  `BaseChatMessageHistory` (extra `convo-store[langchain]`).
- `store.adapters.langgraph.ConvoSaver`: a LangGraph checkpointer
  (`BaseCheckpointSaver`, extra `convo-store[langgraph]`).
- `store.adapters.google_adk.ConvoSessionService`: a Google ADK
  `BaseSessionService` (extra `convo-store[google-adk]`).

All write through the methods of `store.repository.ConversationRepository`,
so they run on PostgreSQL or on the in-memory fake alike, or over the HTTP
API given a `store.client.AsyncConvoClient` instead of a repository; the
mapping of every item and message type is in docs/adapters.md. Importing
this package imports neither framework.
"""
