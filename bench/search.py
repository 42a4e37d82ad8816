"""Search latency over a large tenant, and what the search indexes cost.

- corpus: 1,000,000 messages in 1,000 conversations (100,000 in 100 in a
  quick run), four tenants (the searches run as one: a quarter of the
  data is theirs), loaded with COPY into the real tables in the shape the
  store writes them (`events` with the codec's compact JSON, `messages`,
  `tool_calls`, `batches`, `conversations`; a sample is decoded back by
  the store's codec to prove the shape). Text: ~300 characters from a
  30,000-word Zipf-distributed vocabulary; every 10th message is Chinese
  (no spaces, an English word now and then), every 20th Japanese (kanji,
  kana particles, katakana words); user/assistant turns, a tool call and its result every 5th
  turn (8 tool names); recorded over 90 days. The search indexes are
  built after the load (CREATE INDEX, as the migrations do; the substring
  index as `convo search-index enable substring` would), then
  `VACUUM (ANALYZE)`. `CONVO_BENCH_SEARCH_DATABASE=<url>` keeps the corpus:
  the run loads it into that database the first time and searches it as
  it is afterwards (building again a search index a run dropped).
- latency: `Repository.search_messages` (what `GET /messages/search`
  calls, minus HTTP), each query form repeated, in turns; p50/p95 in ms.
  Query forms: a rare word, a mid-frequency word, two words, a phrase,
  a 2-character Chinese word, a Japanese word, Chinese with an English
  word, an English substring, Chinese substrings (2 and 3 characters),
  and text with filters (role + time range, one conversation,
  conversation metadata, a tool's name).
- index bytes per message: `pg_relation_size` of each search index over
  the number of messages (built in one go: an index grown by single
  inserts is somewhat larger); and what reading CJK as bigrams costs: the
  words index against one built with the parser's words only (before
  migration 0018), over the CJK messages.
- append: single-message appends through the repository with the words
  index, a Chinese message against an English one of the same length;
  p50 in ms.
- insert with the substring index: 2,000 content events inserted in turns
  into a table with the words index and one with the substring index too;
  ms per message, and the bytes a message the substring index grew by.

No figure is asserted; the goal (p95 ≤ 100 ms) is compared in `comparisons`.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench.harness import open_repository, quick_mode, raw_sync_connection, run_and_record
from bench.report import comparison, print_comparisons, print_table
from hosting import migrate
from hosting.engines import make_sync_engine
from hosting.settings import Settings
from store.domain.codec import decode_message
from store.domain.events import from_data
from store.domain.messages import Message
from store.domain.search import SearchQuery, search_query
from store.domain.search_words import REWRITE_TRIGGER
from store.domain.tokens import estimate_message_tokens
from store.postgres import search_indexes

QUICK = quick_mode()
CONVERSATIONS = 100 if QUICK else 1_000
PER_CONVERSATION = 1_000
TENANTS = 4
REPEATS = 30 if QUICK else 100
WARMUP = 3
# A form as slow as a scan (a word-part substring) stops repeating
# after this many seconds once it has MIN_REPEATS samples: its p95 is then
# read from fewer samples, and the run stays within `make bench`'s budget.
FORM_BUDGET_S = 12.0
MIN_REPEATS = 20
UNINDEXED_REPEATS = 3
GOAL_P95_MS = 100.0
KEPT_DATABASE_ENV = "CONVO_BENCH_SEARCH_DATABASE"

TOOLS = (
    "read_file",
    "write_file",
    "grep",
    "run_tests",
    "web_search",
    "shell",
    "list_dir",
    "http_get",
)
_SYLLABLES = [
    "ka",
    "ri",
    "to",
    "mo",
    "ne",
    "sa",
    "lu",
    "vi",
    "de",
    "po",
    "an",
    "el",
    "is",
    "or",
    "um",
    "ex",
    "ta",
    "be",
    "co",
    "fi",
    "ga",
    "ho",
    "ju",
    "ki",
    "la",
    "me",
    "no",
    "pa",
    "qu",
    "ra",
    "se",
    "ti",
    "va",
    "wo",
    "xe",
    "yo",
    "zu",
]
_CHINESE = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之"
    "过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前"
    "所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声"
    "全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使"
    "教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑"
)
WORDS = 30_000
CHINESE_WORDS = 5_000
JAPANESE_WORDS = 3_000
_KATAKANA = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモラリルレロン"
_PARTICLES = ("の", "が", "を", "に", "は", "で", "と", "から", "します", "した")
# The corpus's messages are spread over 90 days from 2026-01-01; a time-range
# search asks for ten of them.
MID_JANUARY = {
    "recorded_from": datetime(2026, 1, 10, tzinfo=UTC),
    "recorded_to": datetime(2026, 1, 20, tzinfo=UTC),
}
_ZIPF_S = 1.07


def _zipf(n: int) -> list[float]:
    """Cumulative Zipf weights of ranks 0..n-1."""
    cumulative: list[float] = []
    total = 0.0
    for rank in range(n):
        total += 1 / (rank + 1) ** _ZIPF_S
        cumulative.append(total)
    return cumulative


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < WORDS:
        n = rng.choice((2, 2, 3, 3, 3, 4))
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(n)))
    return sorted(words)


class Corpus:
    """Deterministic message text: Zipf-distributed words, some Chinese."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(self.rng)
        self.rng.shuffle(self.words)
        self._cumulative = _zipf(WORDS)
        # Chinese "words" of 2-3 characters, written without spaces.
        chinese: set[str] = set()
        while len(chinese) < CHINESE_WORDS:
            chinese.add("".join(self.rng.choices(_CHINESE, k=self.rng.choice((2, 3, 3)))))
        self.chinese_words = sorted(chinese)
        self.rng.shuffle(self.chinese_words)
        self._chinese_cumulative = _zipf(CHINESE_WORDS)
        # Japanese words: two kanji, or 2-4 katakana.
        japanese: set[str] = set()
        while len(japanese) < JAPANESE_WORDS:
            if self.rng.random() < 0.5:
                japanese.add("".join(self.rng.choices(_CHINESE, k=2)))
            else:
                japanese.add("".join(self.rng.choices(_KATAKANA, k=self.rng.choice((2, 3, 4)))))
        self.japanese_words = sorted(japanese)
        self.rng.shuffle(self.japanese_words)
        self._japanese_cumulative = _zipf(JAPANESE_WORDS)

    def text(self, chars: int = 300) -> str:
        picked = self.rng.choices(self.words, cum_weights=self._cumulative, k=chars // 5)
        return " ".join(picked)[:chars]

    def chinese(self, chars: int = 120) -> str:
        """Chinese without spaces, an English word every tenth word."""
        picked = self.rng.choices(self.chinese_words, cum_weights=self._chinese_cumulative, k=50)
        english = self.rng.choices(self.words, cum_weights=self._cumulative, k=5)
        for i, word in enumerate(english):
            picked[i * 10 + 9] = f" {word} "
        return "".join(picked)[:chars]

    def japanese(self, chars: int = 120) -> str:
        """Kanji and katakana words joined by kana particles."""
        picked = self.rng.choices(self.japanese_words, cum_weights=self._japanese_cumulative, k=40)
        particles = self.rng.choices(_PARTICLES, k=40)
        return "".join(w + p for w, p in zip(picked, particles, strict=True))[:chars]

    def japanese_word(self, rank: int) -> str:
        """The first katakana word of 3 or more characters from this rank on."""
        return next(w for w in self.japanese_words[rank:] if len(w) >= 3 and w[0] in _KATAKANA)

    def chinese_word(self, rank: int, length: int = 3) -> str:
        """The first Chinese word of `length` characters from this rank on."""
        return next(w for w in self.chinese_words[rank:] if len(w) == length)

    def word(self, rank: int) -> str:
        """The word of this frequency rank (0: the most frequent)."""
        return self.words[rank]

    def searched_words(self) -> tuple[str, str, str]:
        """The words the searches look for: a rare one, one of middling
        frequency and a common one."""
        return self.word(20_000), self.word(2_000), self.word(50)


def _copy(
    cur: psycopg.Cursor[Any], table: str, columns: str, rows: Iterator[tuple[Any, ...]]
) -> None:
    with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def tenant_of(i: int) -> str:
    return f"tenant-{i % TENANTS}"


def conversation_key(i: int) -> str:
    return f"conv-{i:05d}"


def load_corpus(
    url: str,
    settings: Settings,
    *,
    conversations: int,
    per_conversation: int,
    seed: int = 7,
    substring_index: bool = True,
) -> dict[str, Any]:
    """Load the corpus (module docstring) with COPY; build the search
    indexes after (the substring one as an operator who enabled it would
    have it); VACUUM (ANALYZE). Returns facts about what was loaded."""
    corpus = Corpus(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    span = timedelta(days=90)
    ids = [uuid.uuid5(uuid.NAMESPACE_URL, f"bench-search/{i}") for i in range(conversations)]
    with raw_sync_connection(url, settings) as conn, conn.cursor() as cur:
        cur.execute("SET maintenance_work_mem = '256MB'")
        cur.execute("SET statement_timeout = 0")
        cur.execute("DROP INDEX IF EXISTS ix_events_search_text, ix_events_search_substring")
        _copy(
            cur,
            "conversations",
            "id, tenant, key, version, metadata, next_seq, role_counts, created_at",
            (
                (
                    ids[i],
                    tenant_of(i),
                    conversation_key(i),
                    per_conversation + 1,
                    json.dumps({"project": f"p{i % 20}", "team": f"t{i % 3}"}),
                    per_conversation + 1,
                    "{{0,{},{},{}}}".format(*_role_counts(per_conversation)),
                    start,
                )
                for i in range(conversations)
            ),
        )
        _copy(
            cur,
            "batches",
            "conversation_id, batch, boundary, operation, started_at, event_version",
            ((cid, 1, 0, "conversation_started", start, 1) for cid in ids),
        )
        events: list[tuple[Any, ...]] = []
        messages: list[tuple[Any, ...]] = []
        calls: list[tuple[Any, ...]] = []
        sample: list[tuple[str, dict[str, Any]]] = []

        def flush() -> None:
            _copy(cur, "events", "conversation_id, version, type, data, recorded_at", iter(events))
            _copy(
                cur,
                "messages",
                "conversation_id, seq, sort_key, role, agent_id, kind, batch, role_ordinal,"
                " tool_call_id, token_estimate, event_version",
                iter(messages),
            )
            _copy(
                cur,
                "tool_calls",
                "conversation_id, call_id, agent_id, tool_name, assistant_seq, result_seq, status",
                iter(calls),
            )
            events.clear()
            messages.clear()
            calls.clear()

        for i, cid in enumerate(ids):
            at = start + span * i / conversations
            step = span / conversations / per_conversation
            started = {"tenant": tenant_of(i), "metadata": {"project": f"p{i % 20}"}}
            events.append((cid, 1, "conversation_started", json.dumps(started), at))
            ordinals = {"user": 0, "assistant": 0, "tool": 0}
            for seq in range(1, per_conversation + 1):
                role, body, call = _message(corpus, i, seq)
                ordinals[role] += 1
                data = {"seq": seq, "batch": 1, "message": body}
                encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                events.append((cid, seq + 1, "message_appended", encoded, at + step * seq))
                messages.append(
                    (
                        cid,
                        seq,
                        seq,
                        role,
                        "main",
                        body["kind"],
                        1,
                        ordinals[role],
                        body.get("tool_call_id"),
                        estimate_message_tokens(decode_message(body)),
                        seq + 1,
                    )
                )
                if call is not None:
                    call_id, tool = call
                    calls.append((cid, call_id, "main", tool, seq, seq + 1, "complete"))
                if len(sample) < 50 and seq % 7 == 0:
                    sample.append(("message_appended", data))
            if len(events) > 50_000:
                flush()
        flush()
        conn.commit()
        for type_, data in sample:  # the store's own codec reads what was loaded
            from_data(type_, data)
        cur.execute(search_indexes.create_statement("text"))
        if substring_index:
            search_indexes.install_grams(conn)
            cur.execute(search_indexes.create_statement("substring"))
        conn.commit()
    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE)")
    return _loaded_facts(conversations, per_conversation)


def _loaded_facts(
    conversations: int = CONVERSATIONS, per_conversation: int = PER_CONVERSATION
) -> dict[str, Any]:
    return {
        "conversations": conversations,
        "messages": conversations * per_conversation,
        "tenants": TENANTS,
        "vocabulary_words": WORDS,
    }


def _role_counts(n: int) -> tuple[int, int, int]:
    users = sum(1 for s in range(1, n + 1) if _role(s) == "user")
    tools = sum(1 for s in range(1, n + 1) if _role(s) == "tool")
    return users, n - users - tools, tools


def _role(seq: int) -> str:
    turn = (seq - 1) % 10
    if turn == 8:
        return "assistant"  # a tool call
    if turn == 9:
        return "tool"
    return "user" if turn % 2 == 0 else "assistant"


def _message(
    corpus: Corpus, conversation: int, seq: int
) -> tuple[str, dict[str, Any], tuple[str, str] | None]:
    """(role, the codec's JSON of the message, (call id, tool) of a call)."""
    role = _role(seq)
    if seq % 10 == 3:
        text = corpus.chinese()
    elif seq % 20 == 7:
        text = corpus.japanese()
    else:
        text = corpus.text()
    turn = (seq - 1) % 10
    if turn == 8:
        call_id = f"call_{seq}"
        tool = TOOLS[(conversation + seq) % len(TOOLS)]
        call = {"id": call_id, "name": tool, "arguments": {"path": f"src/m{seq % 97}.py"}}
        body = {"role": role, "content": text, "tool_calls": [call], "kind": "output"}
        return role, body, (call_id, tool)
    if turn == 9:
        return (
            role,
            {"role": role, "content": text, "tool_call_id": f"call_{seq - 1}", "kind": "output"},
            None,
        )
    kind = "input" if role == "user" else "output"
    return role, {"role": role, "content": text, "kind": kind}, None


def query_forms(corpus: Corpus) -> dict[str, SearchQuery]:
    """The searches measured, as the API would build them."""
    rare, mid, common = corpus.searched_words()
    part_of_rare = rare[1:] if len(rare) >= 4 else rare
    return {
        "text, a rare word": search_query(q=rare),
        "text, a mid-frequency word": search_query(q=mid),
        "text, two words": search_query(q=f"{mid} {common}"),
        "text, a phrase": search_query(q=f'"{common} {mid}"'),
        "text, Chinese word (2 characters)": search_query(q=corpus.chinese_word(200, 2)),
        "text, Japanese word": search_query(q=corpus.japanese_word(200)),
        "text, Chinese and an English word": search_query(
            q=f"{corpus.chinese_word(20, 2)} {corpus.word(100)}"
        ),
        "substring, part of a word": search_query(q=part_of_rare, mode="substring"),
        "substring, Chinese (2 characters)": search_query(
            q=corpus.chinese_word(200, 2), mode="substring"
        ),
        "substring, Chinese (3 characters)": search_query(
            q=corpus.chinese_word(200), mode="substring"
        ),
        "text + role + time range": search_query(q=mid, role="user", **MID_JANUARY),
        "text + one conversation": search_query(q=mid, conversation_id=conversation_key(0)),
        "text + conversation metadata": search_query(q=mid, metadata={"project": "p4"}),
        "text + tool name": search_query(q=mid, tool_name="grep", role="tool"),
    }


APPENDS = 100 if QUICK else 300
_CONTENT_EVENTS = "type IN ('message_appended', 'message_edited')"
# The words index before migration 0018: the parser's words only.
_PARSER_WORDS = "to_tsvector('simple'::regconfig, convo_search_text(data))"


SCRATCH_ROWS = 2_000
SCRATCH_ROUNDS = 3


def substring_index_insert_cost(url: str, settings: Settings) -> dict[str, float]:
    """What the substring index adds to an insert: the same content events
    (`SCRATCH_ROWS` of them, one statement) inserted in turns into a table
    with the words index (every store's) and into one with the substring
    index too, each built as `convo search-index enable` builds it; ms per
    message, medians of `SCRATCH_ROUNDS` rounds; and the bytes a message
    the substring index grew by."""
    import time

    words, substring = (
        search_indexes.create_statement(kind).split(" USING ", 1)[1]
        for kind in ("text", "substring")
    )
    samples: dict[str, list[float]] = {"without": [], "with": []}
    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        conn.execute("SET statement_timeout = 0")
        conn.execute("DROP TABLE IF EXISTS bench_rows, bench_without, bench_with")
        conn.execute(
            "CREATE TABLE bench_rows AS SELECT data, type FROM events"
            f" WHERE {_CONTENT_EVENTS} LIMIT {SCRATCH_ROWS}"
        )
        for name in samples:
            conn.execute(f"CREATE TABLE bench_{name} (data json, type event_type)")
        for name in samples:
            conn.execute(f"CREATE INDEX bench_{name}_words ON bench_{name} USING {words}")
        conn.execute(f"CREATE INDEX bench_substring ON bench_with USING {substring}")
        for _ in range(SCRATCH_ROUNDS):
            for name, values in samples.items():
                started = time.perf_counter()
                conn.execute(f"INSERT INTO bench_{name} SELECT data, type FROM bench_rows")
                values.append((time.perf_counter() - started) * 1000 / SCRATCH_ROWS)
        size = conn.execute("SELECT pg_relation_size('bench_substring')").fetchone()
        assert size is not None
        conn.execute("DROP TABLE bench_rows, bench_without, bench_with")
    return {
        "ms_per_message_without": statistics.median(samples["without"]),
        "ms_per_message_with": statistics.median(samples["with"]),
        "grown_bytes_per_message": size[0] / (SCRATCH_ROWS * SCRATCH_ROUNDS),
    }


def cjk_index_cost(url: str, settings: Settings) -> dict[str, float]:
    """What reading CJK as bigrams costs the words index: the index over
    the CJK messages only, built as now and as before migration 0018, in
    bytes per CJK message, beside the bytes of those messages' text."""
    where = f"WHERE {_CONTENT_EVENTS} AND convo_search_text(data) ~ '{REWRITE_TRIGGER}'"
    sizes: dict[str, float] = {}
    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        conn.execute("SET statement_timeout = 0")
        conn.execute("SET maintenance_work_mem = '256MB'")
        row = conn.execute(
            f"SELECT count(*), avg(octet_length(convo_search_text(data))) FROM events {where}"
        ).fetchone()
        assert row is not None
        count, text_bytes = int(row[0]), float(row[1] or 0)
        for name, expression in (
            ("bigrams", "convo_search_vector(data)"),
            ("parser", _PARSER_WORDS),
        ):
            conn.execute(f"DROP INDEX IF EXISTS bench_cjk_{name}")
            conn.execute(
                f"CREATE INDEX bench_cjk_{name} ON events USING gin ({expression}) {where}"
            )
            size = conn.execute(f"SELECT pg_relation_size('bench_cjk_{name}')").fetchone()
            assert size is not None
            sizes[name] = size[0] / max(count, 1)
            conn.execute(f"DROP INDEX bench_cjk_{name}")
    return {
        "cjk_messages": count,
        "text_bytes_per_cjk_message": text_bytes,
        "words_index_bytes_per_cjk_message": sizes["bigrams"],
        "parser_words_index_bytes_per_cjk_message": sizes["parser"],
    }


async def append_cost(url: str, settings: Settings, corpus: Corpus) -> dict[str, float]:
    """Single-message appends with the words index: a Chinese message
    against an English one of as many characters (p50 ms), taken in turns."""
    import time

    samples: dict[str, list[float]] = {"chinese": [], "english": []}
    async with open_repository(url, settings, pool_size=2) as base:
        repository = base.for_tenant(tenant_of(0))
        conversations = {
            language: (await repository.create_conversation()).id for language in samples
        }
        for _ in range(WARMUP + APPENDS):
            chinese = corpus.chinese()
            texts = {"chinese": chinese, "english": corpus.text(len(chinese))}
            for language, text in texts.items():
                started = time.perf_counter()
                await repository.append_messages(
                    conversations[language], [Message(role="user", content=text)]
                )
                samples[language].append(time.perf_counter() - started)
    return {
        f"{language}_p50": _percentile(values[WARMUP:], 0.5) for language, values in samples.items()
    }


def _percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))] * 1000


def kept_corpus(settings: Settings) -> str | None:
    """The database named by `CONVO_BENCH_SEARCH_DATABASE` (it must exist),
    ready: migrated, loaded the first time, its search indexes built again
    where a run dropped them (`_substring_without_its_index`)."""
    url = os.environ.get(KEPT_DATABASE_ENV, "").strip()
    if not url:
        return None
    engine = make_sync_engine(url, settings)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        row = conn.execute("SELECT count(*) FROM conversations WHERE key LIKE 'conv-%%'").fetchone()
        if row is not None and row[0] == CONVERSATIONS:
            for kind in ("text", "substring"):
                search_indexes.enable(conn, kind)
            return url
    load_corpus(url, settings, conversations=CONVERSATIONS, per_conversation=PER_CONVERSATION)
    return url


async def run(url: str, settings: Settings) -> dict[str, Any]:
    import time

    kept = kept_corpus(settings)
    if kept is None:
        loaded = load_corpus(
            url, settings, conversations=CONVERSATIONS, per_conversation=PER_CONVERSATION
        )
    else:
        url = kept
        loaded = _loaded_facts()
    corpus = Corpus(7)
    forms = query_forms(corpus)
    latencies: dict[str, list[float]] = {name: [] for name in forms}
    hits: dict[str, int] = {}

    def over_budget(name: str) -> bool:
        samples = latencies[name]
        return len(samples) >= MIN_REPEATS and sum(samples) > FORM_BUDGET_S

    async with open_repository(url, settings, pool_size=2) as base:
        repository = base.for_tenant(tenant_of(0))
        for i in range(WARMUP + REPEATS):
            for name, query in forms.items():
                if over_budget(name):
                    continue
                started = time.perf_counter()
                page = await repository.search_messages(query)
                if i >= WARMUP:
                    latencies[name].append(time.perf_counter() - started)
                hits[name] = len(page.hits)
    with raw_sync_connection(url, settings) as conn:
        sizes = dict(
            conn.execute(
                "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class AS c"
                " WHERE c.relname IN ('ix_events_search_text', 'ix_events_search_substring',"
                " 'events', 'messages')"
            ).fetchall()
        )
    messages = loaded["messages"]
    per_message = {name: size / messages for name, size in sizes.items()}
    cjk = cjk_index_cost(url, settings)
    substring_inserts = substring_index_insert_cost(url, settings)
    appends = await append_cost(url, settings, corpus)
    unindexed = (
        await _substring_without_its_index(url, settings, forms)
        if sizes.get("ix_events_search_substring")
        else {}
    )
    return {
        "loaded": loaded,
        "repeats": REPEATS,
        "latency_ms": {
            name: {
                "p50": _percentile(samples, 0.50),
                "p95": _percentile(samples, 0.95),
                "mean": statistics.fmean(samples) * 1000,
                "repeats": len(samples),
                "hits_on_first_page": hits[name],
            }
            for name, samples in latencies.items()
        },
        "substring_without_its_index_ms": unindexed,
        "cjk_words_index": cjk,
        "substring_index_insert": substring_inserts,
        "append_with_words_index_ms": appends,
        "bytes_per_message": per_message,
        "search_index_bytes_per_message": per_message.get("ix_events_search_text", 0)
        + per_message.get("ix_events_search_substring", 0),
    }


async def _substring_without_its_index(
    url: str, settings: Settings, forms: dict[str, SearchQuery]
) -> dict[str, dict[str, float]]:
    """The substring forms again after `convo search-index disable substring`: what
    a store that did not opt in to the index pays (a few repeats: each
    reads the tenant's events)."""
    import time

    from store.postgres import search_indexes

    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        search_indexes.disable(conn, "substring")
    substring = {name: q for name, q in forms.items() if q.mode == "substring"}
    samples: dict[str, list[float]] = {name: [] for name in substring}
    async with open_repository(url, settings, pool_size=2) as base:
        repository = base.for_tenant(tenant_of(0))
        for _ in range(UNINDEXED_REPEATS):
            for name, query in substring.items():
                started = time.perf_counter()
                await repository.search_messages(query)
                samples[name].append(time.perf_counter() - started)
    return {
        name: {"p50": _percentile(values, 0.5), "max": max(values) * 1000}
        for name, values in samples.items()
    }


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    messages = figures["loaded"]["messages"]
    cjk = figures["cjk_words_index"]
    appends = figures["append_with_words_index_ms"]
    inserts = figures["substring_index_insert"]
    costs = [
        comparison(
            "insert of 2,000 content events, words and substring indexes vs the words index,"
            " per message (info)",
            inserts["ms_per_message_with"],
            inserts["ms_per_message_without"],
            unit="ms",
            baseline_name="the words index only",
            note=f"the index grew {inserts['grown_bytes_per_message']:.0f} bytes a message",
        ),
        comparison(
            "words index per CJK message, bigrams and unigrams vs the parser's words (info)",
            cjk["words_index_bytes_per_cjk_message"],
            cjk["parser_words_index_bytes_per_cjk_message"],
            unit="bytes",
            baseline_name="before migration 0018",
            note=f"the text itself: {cjk['text_bytes_per_cjk_message']:.0f} bytes",
        ),
        comparison(
            "single append with the words index, Chinese vs English message (info)",
            appends["chinese_p50"],
            appends["english_p50"],
            unit="ms",
            baseline_name="English, as many characters",
        ),
    ]
    return costs + [
        comparison(
            f"search p95, {name} ({messages:,} messages)",
            row["p95"],
            GOAL_P95_MS,
            unit="ms",
            baseline_name=f"goal: {GOAL_P95_MS:g} ms",
            goal=("<=", 1.0),
        )
        for name, row in figures["latency_ms"].items()
    ]


def main() -> None:
    figures = run_and_record("search", run, comparisons, notes=__doc__ or "")
    print_table(
        f"search latency over {figures['loaded']['messages']:,} messages"
        f" ({'quick' if QUICK else 'full'} run)",
        ["query", "p50 ms", "p95 ms", "hits (page of 50)"],
        [
            [name, row["p50"], row["p95"], row["hits_on_first_page"]]
            for name, row in figures["latency_ms"].items()
        ],
    )
    print_table(
        "substring search without its index (not built: the default)",
        ["query", "p50 ms", "max ms"],
        [
            [name, row["p50"], row["max"]]
            for name, row in figures.get("substring_without_its_index_ms", {}).items()
        ],
    )
    print_table(
        "what CJK costs the words index",
        ["figure", "value"],
        [[name, value] for name, value in figures["cjk_words_index"].items()]
        + [[name, value] for name, value in figures["append_with_words_index_ms"].items()],
    )
    print_table(
        "bytes per message",
        ["relation", "bytes"],
        [[name, value] for name, value in figures["bytes_per_message"].items()],
    )
    print_comparisons("search goals", figures["comparisons"])


if __name__ == "__main__":
    main()
