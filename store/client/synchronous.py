"""`ConvoClient`: the HTTP API, blocking (a script, a notebook, a sync framework).

    with ConvoClient("http://127.0.0.1:8000", api_key=key) as client:
        conversation = client.create_conversation("user-123")
        client.append_messages("user-123", [{"role": "user", "content": "hi"}])
        for message in client.iter_messages("user-123"):
            ...

The same methods as `AsyncConvoClient`, each running that client's method
on an event loop of the client's own, in a thread of its own
(store.client.blocking), and blocking until it is done: one implementation,
so the requests, retries, errors and idempotency keys are the same. It can
be used where an event loop already runs (a notebook). (The framework
adapters are async: they take the `AsyncConvoClient`.)
"""

from __future__ import annotations

from store.client.asynchronous import AsyncConvoClient
from store.client.blocking import iterates, runs
from store.client.blocking_reads import BlockingReads


class ConvoClient(BlockingReads):
    """The convo-store HTTP API for one API key (so one tenant).

    `base_url`: where `convo serve` listens. `api_key`: a key from
    `convo keys create`. `retry`: how requests turned away for now are
    retried. `idempotency_keys`: give each append a fresh key (default)
    unless it names one. `http`: an `httpx.Client` to send with
    instead of the client's own (it then sends the key only if that one
    does; closing it is the caller's). `transport`: what the client's own
    sends through (e.g. `httpx.MockTransport`; a blocking one is sent
    through from worker threads). `sleep`: how it waits between tries
    (tests record the waits). Close it (`close()`, or use it in `with`)
    to close its connections and end its thread."""

    # --- conversations ---------------------------------------------------------------

    create_conversation = runs(AsyncConvoClient.create_conversation)
    get_conversation = runs(AsyncConvoClient.get_conversation)
    list_conversations = runs(AsyncConvoClient.list_conversations)
    iter_conversations = iterates(AsyncConvoClient.iter_conversations)
    update_metadata = runs(AsyncConvoClient.update_metadata)
    archive = runs(AsyncConvoClient.archive)
    unarchive = runs(AsyncConvoClient.unarchive)
    delete = runs(AsyncConvoClient.delete)

    # --- messages and agents ------------------------------------------------------------

    append_messages = runs(AsyncConvoClient.append_messages)
    replace = runs(AsyncConvoClient.replace)
    configure_agent = runs(AsyncConvoClient.configure_agent)
    update_slot = runs(AsyncConvoClient.update_slot)
    context_slots = runs(AsyncConvoClient.context_slots)
    agent_profile = runs(AsyncConvoClient.agent_profile)
    agent = runs(AsyncConvoClient.agent)

    # --- batches, forks, pins ------------------------------------------------------------

    run_batch_operation = runs(AsyncConvoClient.run_batch_operation)
    truncate = runs(AsyncConvoClient.truncate)
    clear = runs(AsyncConvoClient.clear)
    batches = runs(AsyncConvoClient.batches)
    batch_messages = runs(AsyncConvoClient.batch_messages)
    fork = runs(AsyncConvoClient.fork)
    pin_message = runs(AsyncConvoClient.pin_message)
