"""Text helpers every stage uses: counting CJK characters and words, spacing text for people to
read, and a hash of a key as a number in [0, 1) (the hash splits of the corpus and of labelled
tasks)."""

from __future__ import annotations

import hashlib
import itertools
import re

# Han, kana and their full-width punctuation are written without spaces: a line break between two
# of them inside a hard-wrapped Chinese or Japanese paragraph is no space (Korean spaces its words).
UNSPACED = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f"

# Han (with extensions and compatibility ideographs), kana and Hangul syllables: scripts written
# without spaces between words, where one character carries about a word.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]")


def cjk_characters(text: str) -> int:
    return _CJK.subn("", text)[1]  # counted without a string per character (findall's): 2x faster


_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[.,!?;:%)\]}](?:\s|$))")
_SPACE_AFTER_OPENING = re.compile(r"(?<=[(\[{])\s+(?=\w)")


def readable_spacing(text: str, special_tokens: tuple[str, ...] = ("[MASK]",)) -> str:
    """``text`` without the spaces a tokenizer's word-by-word view puts in: none between CJK
    characters, nor between one and a special token (``在成功时更需 [MASK] 谦卑 。`` ->
    ``在成功时更需[MASK]谦卑。``), none before closing punctuation or after an opening bracket
    (``a word .`` -> ``a word.``). transformers' ``clean_up_tokenization`` knows a fixed list of
    English cases and no CJK."""
    tokens = "|".join(re.escape(token) for token in special_tokens)
    after_token = "|".join(f"(?<={re.escape(token)})" for token in special_tokens)
    unspaced = f"[{UNSPACED}]"  # Han, kana, CJK and full-width punctuation (not Hangul: Korean spaces words)
    text = re.sub(f"(?<={unspaced})\\s+(?={unspaced}|{tokens})", "", text)
    text = re.sub(f"(?:{after_token})\\s+(?={unspaced})", "", text)
    text = _SPACE_BEFORE_PUNCTUATION.sub("", text)
    return _SPACE_AFTER_OPENING.sub("", text)


def has_words(text: str, count: int) -> bool:
    """Whether ``text`` holds at least ``count`` words: whitespace-separated tokens, a CJK
    character counting as one ("房间很干净" is five, "two words" two)."""
    if _CJK.search(text) is None:
        return len(text.split(None, count - 1)) >= count  # stops splitting once there are enough
    if sum(1 for _ in itertools.islice(_CJK.finditer(text), count)) == count:
        return True  # enough CJK characters alone: not counting all of them halved the ingestion's time on Chinese
    return cjk_characters(text) + len(_CJK.sub(" ", text).split()) >= count


def hash_unit(key: str) -> float:
    """A number in [0, 1) from a hash of ``key``: the same wherever and in whatever order it is drawn."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64
