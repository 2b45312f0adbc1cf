"""Cut a parsed document into overlapping chunks measured in embedder tokens.

Units are runs of sections that share a page and heading, so every chunk has one
page and one nearest heading. Inside a unit, text is split into sentences (a run-on
sentence into token windows) and packed greedily up to ``chunk_size`` tokens; a chunk
ends at a paragraph break rather than mid-paragraph when that keeps it at least half
full. Each new chunk starts with the last whole sentences of the previous one, up to
``chunk_overlap`` tokens, so context at a boundary is seen on both sides.

Chunks are capped in characters too (``max_chars``, by default 8 a token): the
embedder's tokenizer counts any word over 100 characters as one unknown-word token, so
30,000 letters without a space were one "token" and one chunk, which became 16,560
tokens of the draft model's prompt. A piece weighs the larger of its tokens and its
characters in tokens' worth (``max_chars / chunk_size`` a token); a sentence over
``max_chars`` is first cut in blocks of characters, at a space where there is one.

Deliberately not here: parsing files (``parsers``) and embedding (``embedder``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from specrag.grounding.text import SENTENCE_BREAK
from specrag.types import Chunk, ParsedDocument

_PARA = re.compile(r"\n\s*\n")
# Chinese and Japanese end sentences with full-width marks and no space after them
_SENTENCE = re.compile(SENTENCE_BREAK.pattern + r"|(?<=[。！？])(?=\S)")
# a chunk's characters at most, per token of chunk_size (English runs 4-6 a token)
CHARS_PER_TOKEN = 8


@dataclass(frozen=True)
class _Piece:
    start: int
    end: int
    tokens: int
    para_end: bool = False


def _size(pieces: list[_Piece]) -> int:
    return sum(p.tokens for p in pieces)


class Chunker:
    def __init__(self, tokenizer, chunk_size: int = 200, chunk_overlap: int = 40,
                 max_chars: int = 0):
        if chunk_size < 16:
            raise ValueError("chunk_size must be at least 16 tokens")
        if not 0 <= chunk_overlap < chunk_size // 2:
            raise ValueError("chunk_overlap must be >= 0 and under half of chunk_size")
        max_chars = max_chars or CHARS_PER_TOKEN * chunk_size
        if max_chars < 2 * chunk_size:
            raise ValueError("chunk_max_chars must be 0 (8 a token) or at least 2 a token")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.max_chars = max_chars
        self._tok = _counting_tokenizer(tokenizer)

    def chunk(self, doc: ParsedDocument, doc_id: str, collection: str = "default") -> list[Chunk]:
        chunks: list[Chunk] = []
        for (start, end, page, heading) in _units(doc):
            for (cs, ce) in self._spans(doc.text, start, end):
                text = doc.text[cs:ce]
                chunks.append(Chunk(
                    id=f"{doc_id}:{doc.sha256[:12]}:{len(chunks):05d}", doc_id=doc_id,
                    source=doc.source, text=text, index=len(chunks), start=cs, end=ce,
                    content_hash=hashlib.sha256(text.encode()).hexdigest()[:16],
                    version=doc.sha256, page=page, heading=heading, collection=collection))
        return chunks

    # -- internals ---------------------------------------------------------------
    def _spans(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        current: list[_Piece] = []
        for piece in self._pieces(text, start, end):
            while current and _size(current) + piece.tokens > self.chunk_size:
                cut = self._cut_point(current)
                emitted, rest = current[:cut], current[cut:]
                if not spans or emitted[-1].end > spans[-1][1]:
                    spans.append((emitted[0].start, emitted[-1].end))
                current = self._overlap(emitted) + rest
                # the carried overlap gives way when it leaves no room for the next piece
                while current[:-len(rest) or None] and _size(current) + piece.tokens > self.chunk_size:
                    current.pop(0)
                if current == rest and rest and _size(rest) + piece.tokens > self.chunk_size:
                    continue
                break
            current.append(piece)
        if current and (not spans or current[-1].end > spans[-1][1]):
            spans.append((current[0].start, current[-1].end))
        return spans

    def _cut_point(self, pieces: list[_Piece]) -> int:
        """Cut after the last paragraph end that leaves the chunk at least half full."""
        acc, best = 0, len(pieces)
        for j, p in enumerate(pieces[:-1]):
            acc += p.tokens
            if p.para_end and acc >= self.chunk_size // 2:
                best = j + 1
        return best

    def _overlap(self, previous: list[_Piece]) -> list[_Piece]:
        carried: list[_Piece] = []
        size = 0
        for piece in reversed(previous):
            if size + piece.tokens > self.chunk_overlap:
                break
            carried.insert(0, piece)
            size += piece.tokens
        return carried

    def _pieces(self, text: str, start: int, end: int) -> list[_Piece]:
        """Sentences (or token windows of run-on sentences), marking paragraph ends."""
        out: list[_Piece] = []
        for ps, pe in _split(text, start, end, _PARA):
            sentences: list[_Piece] = []
            for ss, se in _split(text, ps, pe, _SENTENCE):
                # a sentence over max_chars is cut in blocks first, never encoded whole
                for bs, be in _blocks(text, ss, se, self.max_chars):
                    m = self._weight(self._count(text[bs:be]), be - bs)
                    if m <= self.chunk_size:
                        sentences.append(_Piece(bs, be, m))
                    else:
                        sentences.extend(self._token_windows(text, bs, be))
            sentences[-1] = _Piece(sentences[-1].start, sentences[-1].end,
                                   sentences[-1].tokens, para_end=True)
            out.extend(sentences)
        return out

    def _token_windows(self, text: str, start: int, end: int) -> list[_Piece]:
        """Last resort for a block of at most ``max_chars`` over ``chunk_size`` tokens:
        cut at token offsets (``offsets`` read once: the tokenizer builds that list anew
        on every access, which made this loop quadratic)."""
        step = self.chunk_size - self.chunk_overlap
        pieces: list[_Piece] = []
        offsets = self._tok.encode(text[start:end], add_special_tokens=False).offsets
        for i in range(0, len(offsets), step):
            window = offsets[i:i + self.chunk_size]
            s, e = start + window[0][0], start + window[-1][1]
            pieces.append(_Piece(s, e, self._weight(len(window), e - s)))
            if i + self.chunk_size >= len(offsets):
                break
        return pieces

    def _weight(self, tokens: int, chars: int) -> int:
        """Tokens, or characters in tokens' worth where there are more of those."""
        return max(tokens, -(-chars * self.chunk_size // self.max_chars))

    def _count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


def _blocks(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """``text[start:end]`` in spans of about ``size`` characters, cut after whitespace
    where the last tenth of a span has some (a word is then never split in two)."""
    spans, pos = [], start
    while end - pos > size:
        cut = pos + size
        space = max(text.rfind(" ", cut - size // 10, cut), text.rfind("\n", cut - size // 10, cut))
        cut = space + 1 if space > pos else cut
        spans.append((pos, cut))
        pos = cut
    spans.append((pos, end))
    return spans


def _split(text: str, start: int, end: int, pattern: re.Pattern) -> list[tuple[int, int]]:
    """Non-empty, whitespace-trimmed spans of text[start:end] between matches."""
    spans, pos = [], start
    for m in pattern.finditer(text, start, end):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, end))
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def _units(doc: ParsedDocument) -> list[tuple[int, int, int | None, str | None]]:
    """Merge neighbouring sections with the same page and heading."""
    units: list[list] = []
    for s in doc.sections:
        if not s.text.strip():
            continue
        key = (s.page, s.heading)
        if units and (units[-1][2], units[-1][3]) == key:
            units[-1][1] = s.start + len(s.text)
        else:
            units.append([s.start, s.start + len(s.text), s.page, s.heading])
    return [tuple(u) for u in units]


def _counting_tokenizer(tokenizer):
    """A copy of the tokenizer without truncation/padding, so counts are exact."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_truncation()
    tok.no_padding()
    return tok
