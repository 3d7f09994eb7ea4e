"""Encode throughput: the pipeline's `encode_documents` vs raw `tokenizers` `encode_batch` vs
`tokenizer(texts)` (the transformers call), alternating, repeated; medians and ratios.

    python bench/tokenization.py ../shared/corpora/gutenberg --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time

from bert_mlm.core.corpus import clean_documents, read_corpus
from bert_mlm.core.tokenizer import encode_documents, train_wordpiece


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--vocab-size", type=int, default=8192)
    args = parser.parse_args()
    documents, _ = clean_documents(read_corpus(args.corpus))
    texts = documents["text"].tolist()
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    tokenizer = train_wordpiece(texts, vocab_size=args.vocab_size)
    backend = tokenizer.backend_tokenizer
    systems = {
        "bert-mlm encode_documents": lambda: encode_documents(tokenizer, texts),
        "tokenizers encode_batch": lambda: backend.encode_batch(texts, add_special_tokens=False),
        "transformers tokenizer(texts)": lambda: tokenizer(texts, add_special_tokens=False)["input_ids"],
    }
    seconds = {name: [] for name in systems}
    for _ in range(args.repeats):
        for name, run in systems.items():  # alternate, so drifts in machine speed hit all alike
            started = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - started)
    reference = statistics.median(seconds["tokenizers encode_batch"])
    print(f"corpus: {megabytes:.1f} MB, {len(texts)} documents, {args.repeats} alternating repeats\n")
    print("| system | median s | MB/s | vs raw encode_batch |")
    print("|---|---|---|---|")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {megabytes / median:.2f} | {reference / median:.2f}x |")


if __name__ == "__main__":
    main()
