"""How far counting neighbours gets on the held-out text, with no model: the accuracy of always the most
frequent token, of the most frequent token after the left neighbour, and of the most frequent token between
both neighbours (counted on the training split), with the share of their guesses among the 10 most frequent
tokens (the run report's plateau measure). What a model that looks at its neighbours can reach; a model on the
unigram plateau does not (BENCHMARKS.md, "Time to quality: where the plateau comes from").

    python bench/neighbour_lookup.py --language zh
"""

from __future__ import annotations

import argparse
import collections

import numpy as np
from _data import prepare
from time_to_quality import corpora


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", default="en", choices=("en", "zh"))
    parser.add_argument("--positions", type=int, default=20_000)
    args = parser.parse_args()
    corpus, extra = corpora(args.language)
    prepared = prepare(corpus, extra, max_length=128, vocab_size=8192 if args.language == "en" else 21128)
    train = np.concatenate(prepared.token_ids["train"])
    held_out = np.concatenate(prepared.token_ids["extra" if extra else "test"])
    unigram = collections.Counter(train.tolist())
    frequent, top = {token for token, _ in unigram.most_common(10)}, unigram.most_common(1)[0][0]
    after, between = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    for left, token, right in zip(train[:-2].tolist(), train[1:-1].tolist(), train[2:].tolist(), strict=True):
        after[left][token] += 1
        between[left, right][token] += 1

    def best(counts: collections.Counter, fallback: int) -> int:
        return counts.most_common(1)[0][0] if counts else fallback

    guesses = {
        "the most frequent token": lambda i: top,
        "after the left neighbour": lambda i: best(after[held_out[i - 1]], top),
        "between both neighbours": lambda i: best(between[held_out[i - 1], held_out[i + 1]],
                                                  best(after[held_out[i - 1]], top)),
    }
    positions = np.random.default_rng(0).integers(1, len(held_out) - 1, args.positions)
    print(f"| {args.language}: lookup | accuracy | share among the 10 most frequent |\n|---|---|---|")
    for name, guess in guesses.items():
        predicted = [guess(i) for i in positions]
        accuracy = np.mean([p == held_out[i] for p, i in zip(predicted, positions, strict=True)])
        print(f"| {name} | {accuracy:.3f} | {np.mean([p in frequent for p in predicted]):.0%} |")


if __name__ == "__main__":
    main()
