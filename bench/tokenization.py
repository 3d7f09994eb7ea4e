"""Encode throughput: the pipeline's `encode_documents` vs raw `tokenizers` `encode_batch` (and
`encode_batch_fast`, which skips character offsets) vs `tokenizer(texts)` (the transformers call),
same text, alternating, repeated; medians and ratios.

    python bench/tokenization.py --corpus ../shared/corpora/gutenberg --repeats 5
"""

from __future__ import annotations

import argparse

from _data import Prepared, prepare
from _timing import Table, alternate, rate_table

from bert_mlm.core.tokens.tokenizer import encode_documents


def run(prepared: Prepared, repeats: int = 5) -> Table:
    texts = prepared.texts["train"]
    tokenizer = prepared.tokenizer
    backend = tokenizer.backend_tokenizer
    seconds = alternate({
        "bert-mlm encode_documents": lambda: encode_documents(tokenizer, texts),
        "tokenizers encode_batch": lambda: backend.encode_batch(texts, add_special_tokens=False),
        "tokenizers encode_batch_fast": lambda: backend.encode_batch_fast(texts, add_special_tokens=False),
        "transformers tokenizer(texts)": lambda: tokenizer(texts, add_special_tokens=False)["input_ids"],
    }, repeats)
    megabytes = prepared.train_megabytes
    rates = {name: [megabytes / s for s in values] for name, values in seconds.items()}
    return rate_table(
        "Tokenization: encode throughput", rates, "tokenizers encode_batch", "MB/s",
        [f"{megabytes:.1f} MB of training text in {len(texts):,} documents, {repeats} alternating repeats, "
         f"{len(tokenizer):,}-token WordPiece vocabulary trained on it."],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(run(prepare(args.corpus), args.repeats).markdown())


if __name__ == "__main__":
    main()
