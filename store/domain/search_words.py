"""How text search reads Chinese, Japanese and Korean: the one home of the
tokenising rule, used by the words index (its SQL is built from this
module: `store.postgres.search_words`), the query mapper, the in-memory
storage and the highlighter.

PostgreSQL's word parser keeps a run of CJK characters as one word (a
whole Chinese sentence, which has no spaces, is one token), so its words
cannot be found. Text that contains CJK is therefore rewritten before the
parser reads it (`index_words`):

- a CJK run (Han, Hiragana, Katakana, Hangul, without punctuation)
  becomes its overlapping character bigrams, then its last character:
  `解析器` → `解析 析器 器`; each character of the run holds one position,
  so a phrase of bigrams is adjacent exactly when the characters are;
- every character of the text's runs is added once more at the end, as a
  word of its own (unigrams), so a single character is found too;
- CJK and full-width punctuation (`，。「」・`…) splits runs like a space;
- only the first `REWRITTEN_CHARS` characters are rewritten; the rest is
  left to the parser (its Latin words are found, its CJK runs are whole
  words): a message's words must fit a `tsvector` (1 MB), and an append
  must never fail, or take long, because its text is long.

Text without CJK is not rewritten: its words are the parser's, as before.
A query is mapped the same way (`map_query`): a 1-character run is its
unigram, a 2-character run its bigram, a longer run the phrase of its
bigrams; a run followed by another word in a phrase (`"修复 parser"`,
`修复parser`) also names its last character, which sits between them.

A phrase costs a search more than its words: the index finds the rows
with all of them, and each row's words are computed again to check their
positions (for CJK text, the rewriting above, per row). So a CJK word the
query requires outright (not quoted, not excluded, no `OR` in the query)
is asked as its bigrams ANDed, which the index answers alone, and the
characters as typed are required of the text (`WordsQuery.runs`): the
same hits as the phrase, since a CJK run holds its bigrams adjacent
exactly where its characters are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CJK_CHARACTERS",
    "CJK_PUNCTUATION",
    "QUERY_PARTS",
    "REWRITTEN_CHARS",
    "WordsQuery",
    "has_cjk",
    "highlight_spans",
    "index_words",
    "is_cjk_only",
    "map_query",
]


def _char_class(ranges: tuple[tuple[int, int], ...], negate: bool = False) -> str:
    """A bracket expression both Python's `re` and PostgreSQL's regular
    expressions read the same way (the characters themselves, no escapes)."""
    inner = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)
    return f"[{'^' if negate else ''}{inner}]"


# The characters of a CJK run: the letters of the Han, kana and Hangul blocks.
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3041, 0x309F),  # Hiragana
    (0x30A1, 0x30FA),  # Katakana (without ・, which separates words)
    (0x30FC, 0x30FF),  # ー ヽ ヾ ヿ
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK unified ideographs, extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0xFFA0, 0xFFDC),  # half-width Hangul
    (0x20000, 0x3134F),  # CJK unified ideographs, extensions B-G, compatibility supplement
)
# Punctuation that splits runs and words: CJK symbols, full-width forms,
# and the general punctuation (quotes, dashes, ellipsis) CJK text uses.
_PUNCTUATION_RANGES = (
    (0x2010, 0x205E),  # general punctuation: ‐ – — ‘ ’ “ ” … ‰ ※
    (0x3000, 0x3004),  # ideographic space, 、 。 〃 〄
    (0x3008, 0x303F),  # 「」『』【】〜 …
    (0x30A0, 0x30A0),  # ゠
    (0x30FB, 0x30FB),  # ・
    (0xFE10, 0xFE19),  # vertical forms
    (0xFE30, 0xFE4F),  # CJK compatibility forms
    (0xFF01, 0xFF0F),  # ！＂＃…／
    (0xFF1A, 0xFF20),  # ：；＜＝＞？＠
    (0xFF3B, 0xFF40),  # ［＼］＾＿｀
    (0xFF5B, 0xFF65),  # ｛｜｝～｟｠｡｢｣､･
)

REWRITTEN_CHARS = 10_000  # at most ~25 bytes of tsvector a character: 250 kB

CJK_CHARACTERS = _char_class(_CJK_RANGES)
NOT_CJK_CHARACTERS = _char_class(_CJK_RANGES, negate=True)
CJK_PUNCTUATION = _char_class(_PUNCTUATION_RANGES)
# Text is rewritten when it has CJK letters or the punctuation that goes
# with them (full-width and CJK symbols: not the general punctuation,
# which English text uses and the parser already splits on).
REWRITE_TRIGGER = _char_class(_CJK_RANGES + _PUNCTUATION_RANGES[1:])
# A CJK run, or a stretch of anything else.
PIECES = f"({CJK_CHARACTERS}+)|({NOT_CJK_CHARACTERS}+)"

_TRIGGER = re.compile(REWRITE_TRIGGER)
_PIECES = re.compile(PIECES)
_PUNCTUATION = re.compile(CJK_PUNCTUATION)
_CJK_RUN = re.compile(f"{CJK_CHARACTERS}+")
_WORD_CHAR = re.compile(r"\w")


def has_cjk(text: str) -> bool:
    """Whether `text` is rewritten (CJK letters or CJK punctuation)."""
    return _TRIGGER.search(text) is not None


def is_cjk_only(text: str) -> bool:
    """Whether `text` is one CJK run and nothing else."""
    return _CJK_RUN.fullmatch(text) is not None


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _run_words(run: str) -> str:
    """A run as the index holds it: one word per character position."""
    return " ".join([*_bigrams(run), run[-1]])


def index_words(text: str) -> str:
    """`text` as the words index's parser reads it (the module docstring):
    unchanged without CJK; else runs as bigrams then the last character,
    punctuation as spaces, every run's characters again, then the text
    beyond `REWRITTEN_CHARS` as it is. The SQL function
    `convo_search_words` is the same rule."""
    if not has_cjk(text):
        return text
    head, rest = text[:REWRITTEN_CHARS], text[REWRITTEN_CHARS:]
    sequence: list[str] = []
    unigrams: list[str] = []
    for match in _PIECES.finditer(head):
        run, other = match.groups()
        if run:
            sequence.append(_run_words(run))
            unigrams.append(" ".join(run))
        else:
            sequence.append(_PUNCTUATION.sub(" ", other))
    return " ".join(sequence) + " " + " ".join(unigrams) + " " + rest


def _pieces(text: str) -> list[tuple[bool, str]]:
    """(is a CJK run, the piece) in order, punctuation already spaces."""
    return [
        (bool(run), run or _PUNCTUATION.sub(" ", other).replace('"', " "))
        for run, other in _PIECES.findall(text)
    ]


def _phrase_words(text: str) -> str:
    """The words of a phrase, in index positions: a run followed by
    another word also names its last character (its own position)."""
    pieces = _pieces(text)
    out: list[str] = []
    for i, (cjk, piece) in enumerate(pieces):
        if not cjk or len(piece) == 1:
            out.append(piece)
        else:
            followed = any(_WORD_CHAR.search(p) for _, p in pieces[i + 1 :])
            out.append(_run_words(piece) if followed else " ".join(_bigrams(piece)))
    return " ".join(" ".join(out).split())


def _word(word: str, runs: list[str] | None) -> str:
    """One unquoted word of a query (its `-` already taken off); a long
    CJK run is its bigrams ANDed when `runs` takes it as typed."""
    pieces = [(cjk, p) for cjk, p in _pieces(word) if cjk or p.strip()]
    if len(pieces) == 1 and pieces[0][0]:
        run = pieces[0][1]
        if len(run) <= 2:
            return run  # a unigram or a bigram
        if runs is not None:
            runs.append(run)
            return " ".join(_bigrams(run))
    if not any(cjk for cjk, _ in pieces):
        return " ".join(p for _, p in pieces)
    return f'"{_phrase_words(word)}"'


# A query's parts in web-search syntax: `"a phrase"` or `-"a phrase"`, or
# a word (`-word` excluded, `OR`).
QUERY_PARTS = re.compile(r'(-?)"([^"]*)"|(\S+)')


@dataclass(frozen=True)
class WordsQuery:
    """A text query as the words index is asked it: `words` in web-search
    syntax, and the CJK `runs` the text must hold as typed."""

    words: str
    runs: tuple[str, ...] = ()


def map_query(q: str) -> WordsQuery:
    """A text query (web-search syntax: words, `"phrase"`, `OR`, `-word`)
    mapped to the index's words (the module docstring). Without CJK it is
    unchanged."""
    if not has_cjk(q):
        return WordsQuery(q)
    parts = QUERY_PARTS.findall(q)
    alternatives = any(word.lower() == "or" for _, _, word in parts)
    runs: list[str] | None = None if alternatives else []
    out: list[str] = []
    for minus, phrase, word in parts:
        if phrase:
            out.append(f'{minus}"{_phrase_words(phrase)}"')
        elif word.startswith("-") and len(word) > 1:
            out.append("-" + _word(word[1:], None))
        else:
            out.append(_word(word, runs))
    words = " ".join(part for part in out if part.strip(' "-'))
    return WordsQuery(words, tuple(runs or ()))


def highlight_spans(text: str, q: str) -> list[tuple[int, int]]:
    """Where the words `q` looks for stand in `text`: each CJK run of the
    query wherever it occurs, each other word where it is a whole word
    (CJK characters around it count as word boundaries); the `-excluded`
    words are not highlighted. Sorted, overlaps merged."""
    spans: list[tuple[int, int]] = []
    for minus, phrase, word in QUERY_PARTS.findall(q):
        if minus or (word.startswith("-") and len(word) > 1):
            continue
        for cjk, piece in _pieces(phrase or word):
            if cjk:
                pattern = re.escape(piece)
            else:
                words = [w for w in re.findall(r"\w+", piece) if w.lower() != "or" or phrase]
                if not words:
                    continue
                # A whole word: no letter or digit of another script around it.
                edge = f"(?:(?<=\\W)|(?<={CJK_CHARACTERS})|^)"
                after = f"(?=\\W|{CJK_CHARACTERS}|$)"
                pattern = "|".join(f"{edge}{re.escape(w)}{after}" for w in words)
            spans += [m.span() for m in re.finditer(pattern, text, re.IGNORECASE)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
