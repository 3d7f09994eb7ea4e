"""Chinese word segmenters for whole-word masking: speed, and agreement of their word starts with
jieba's (the reference: the segmenter of Chinese BERT-wwm and of Hugging Face's run_chinese_ref.py;
msra-ner's ner_train.conll is character-level NER, not a word segmentation).

    python bench/word_segmenters.py                       # every installed candidate, both corpora
    python bench/word_segmenters.py --repeats 5 --limit 20000

Whole-word masking needs only where words *start* (a token continues a word when its character
is not a start), so that is what is compared: per corpus, the share of texts whose starts equal
jieba's, precision and recall of the starts, and where the differing starts are (inside or
beside a run of ASCII letters/digits, beside punctuation or spaces, or between two CJK
characters). Speed: characters per second on one core, the median of ``--repeats`` passes over
the same texts (every segmenter, in turn, in each pass). A candidate that is not installed is
left out of the table (``pip install rjieba jieba-fast-dat cppjieba-py-dat jieba-next``).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import statistics
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "corpora"


def _starts_from_tokens(tokens) -> set[int]:
    return {start for _, start, _ in tokens}


def _starts_from_words(words) -> set[int]:
    starts, position = set(), 0
    for word in words:
        starts.add(position)
        position += len(word)
    return starts


def candidates() -> dict[str, Callable[[str], set[int]]]:
    """Each installed segmenter as text -> word start offsets (default mode, HMM on, as jieba's
    ``tokenize``)."""
    found: dict[str, Callable[[str], set[int]]] = {}
    try:
        import jieba

        jieba.setLogLevel(60)
        jieba.initialize()
        found["jieba 0.42 (Python)"] = lambda text: _starts_from_tokens(jieba.tokenize(text))
    except ImportError as error:
        raise SystemExit("jieba is the reference: pip install jieba") from error
    from bert_mlm.core.tokens.words import word_starts

    found["rjieba + jieba's ASCII cuts (this project)"] = lambda text: set(word_starts(text, "rjieba"))
    for label, module, make in (
        ("rjieba alone (jieba-rs, Rust)", "rjieba", lambda m: lambda text: _starts_from_tokens(m.tokenize(text))),
        ("jieba-fast-dat (C++)", "jieba_fast_dat", lambda m: lambda text: _starts_from_tokens(m.tokenize(text))),
        ("cppjieba-py-dat (C++)", "cppjieba_py_dat", lambda m: lambda text: _starts_from_words(m.cut(text))),
        ("jieba-next (Rust core)", "jieba_next", lambda m: lambda text: _starts_from_tokens(m.tokenize(text))),
    ):
        try:
            imported = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(imported, "setLogLevel"):
            imported.setLogLevel(60)
        if hasattr(imported, "initialize"):
            imported.initialize()
        found[label] = make(imported)
    return found


def corpora(limit: int | None) -> dict[str, list[str]]:
    reviews = SHARED / "chnsenticorp" / "ChnSentiCorp_htl_all.csv"
    with reviews.open(encoding="utf-8") as handle:
        texts = [row["review"] for row in csv.DictReader(handle) if row.get("review")]
    news = [line.strip() for line in (SHARED / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()]
    clean = lambda items: [unicodedata.normalize("NFC", t) for t in items if t][:limit]  # noqa: E731
    return {"ChnSentiCorp reviews": clean(texts), "msra-ner news.txt": clean(news)}


def _kind(character: str) -> str:
    if not character:
        return "edge"
    if character.isascii() and character.isalnum():
        return "ascii"
    if character.isspace():
        return "space"
    if unicodedata.category(character).startswith(("P", "S")):
        return "punct"
    if "\u4e00" <= character <= "\u9fff" or "\u3400" <= character <= "\u4dbf":
        return "cjk"
    return "other"


def where(text: str, position: int) -> str:
    """Where a differing start lies: by the characters on both sides of it."""
    kinds = {_kind(text[position - 1] if position else ""), _kind(text[position] if position < len(text) else "")}
    if "ascii" in kinds:
        return "inside or beside ASCII letters/digits"
    if kinds & {"punct", "space"}:
        return "beside punctuation or a space"
    if kinds == {"cjk"}:
        return "between two CJK characters"
    return "other (full-width digits, letters, symbols)"


def compare(reference: Callable[[str], set[int]], other: Callable[[str], set[int]], texts: list[str]) -> dict:
    same = common = in_reference = in_other = 0
    places: Counter = Counter()
    examples: list[str] = []
    for text in texts:
        a, b = reference(text), other(text)
        same += a == b
        common += len(a & b)
        in_reference += len(a)
        in_other += len(b)
        for position in sorted(a ^ b):
            places[where(text, position)] += 1
        if a != b and len(examples) < 3:
            examples.append(text[:60])
    return {
        "texts_identical": same / len(texts),
        "precision": common / max(in_other, 1),
        "recall": common / max(in_reference, 1),
        "differing_starts": sum(places.values()),
        "places": places,
        "examples": examples,
    }


def speed(segment: Callable[[str], set[int]], texts: list[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        segment(text)
    return sum(map(len, texts)) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="at most this many texts per corpus")
    args = parser.parse_args()
    found = candidates()
    reference = next(iter(found))
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    for corpus, texts in corpora(args.limit).items():
        characters = sum(map(len, texts))
        rates: dict[str, list[float]] = {name: [] for name in found}
        for _ in range(args.repeats):
            for name, segment in found.items():
                rates[name].append(speed(segment, texts))
        print(f"\n### {corpus}: {len(texts):,} texts, {characters / 1e6:.2f} M characters\n")
        print("| segmenter | M chars/s (1 core) | vs jieba | texts with jieba's starts | precision | recall "
              "| differing starts | where they differ |")
        print("|---|---|---|---|---|---|---|---|")
        base = statistics.median(rates[reference])
        for name, segment in found.items():
            rate = statistics.median(rates[name])
            result = compare(found[reference], segment, texts)
            places = "; ".join(f"{place}: {count:,}" for place, count in result["places"].most_common())
            print(f"| {name} | {rate / 1e6:.2f} | {rate / base:.1f}x | {result['texts_identical']:.2%} "
                  f"| {result['precision']:.4f} | {result['recall']:.4f} | {result['differing_starts']:,} "
                  f"| {places or '-'} |")
            for example in result["examples"] if name != reference else ():
                print(f"  e.g. {example}")


if __name__ == "__main__":
    main()
