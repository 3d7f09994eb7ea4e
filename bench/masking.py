"""Masking throughput: this project's batch assembly + dynamic masking vs Hugging Face's
`DataCollatorForLanguageModeling`, on the same sequences, alternating, repeated.

    python bench/masking.py --corpus ../shared/corpora/gutenberg

Two comparisons: the whole per-batch data path (list of sequences -> padded, masked tensors),
and the masking function alone on an already padded batch. The HF collator gets the
`special_tokens_mask` column as the `run_mlm` recipe provides it (`return_special_tokens_mask=True`);
a row without it shows the collator's fallback (a Python loop over every token).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from _data import Prepared, prepare  # bench/ is on sys.path: these scripts run as `python bench/<name>.py`
from _timing import Table, alternate, rate_table
from transformers import DataCollatorForLanguageModeling

from bert_mlm.config import MaskingConfig
from bert_mlm.core.model.masking import mask_generator, mask_tokens
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.sequences import Collator


def run(prepared: Prepared, repeats: int = 5, batches: int = 100, batch_size: int = 32) -> list[Table]:
    tokenizer = prepared.tokenizer
    ids = TokenIds.from_tokenizer(tokenizer)
    sequences = prepared.sequences["train"]
    rng = np.random.default_rng(0)
    picked = [[sequences[i] for i in rng.choice(len(sequences), batch_size, replace=False)] for _ in range(batches)]
    tokens = sum(len(s) for batch in picked for s in batch)
    collator = Collator(ids.pad, ids.special, prepared.max_length)
    masking = MaskingConfig()
    hf = DataCollatorForLanguageModeling(tokenizer, mlm_probability=masking.probability, pad_to_multiple_of=8)
    special = set(ids.special)
    with_special = [
        [{"input_ids": s.tolist(), "special_tokens_mask": [int(t in special) for t in s.tolist()]} for s in b]
        for b in picked
    ]
    ids_only = [[{"input_ids": s.tolist()} for s in b] for b in picked]

    def ours_path() -> None:
        for i, sequences_of_batch in enumerate(picked):
            batch = collator(sequences_of_batch)
            mask_tokens(batch["input_ids"], batch["special_tokens_mask"], ids.mask, ids.replacement, masking,
                        mask_generator(0, 0, i))

    def hf_path(examples) -> None:
        for batch in examples:
            hf(batch)

    path_seconds = alternate({
        "bert-mlm Collator + mask_tokens": ours_path,
        "HF collator, with special_tokens_mask (run_mlm)": lambda: hf_path(with_special),
        "HF collator, input_ids only": lambda: hf_path(ids_only),
    }, repeats)

    collated = [collator(batch) for batch in picked]
    torch.manual_seed(0)  # the HF collator draws from the global generator

    def ours_mask() -> None:
        for i, b in enumerate(collated):
            mask_tokens(
                b["input_ids"], b["special_tokens_mask"], ids.mask, ids.replacement, masking, mask_generator(0, 0, i)
            )

    # torch_mask_tokens masks its input in place: it gets its own copies (made once, outside the
    # timing; masking already-masked ids costs the same).
    hf_batches = [(b["input_ids"].clone(), b["special_tokens_mask"].clone()) for b in collated]

    def hf_mask() -> None:
        for input_ids, special_tokens_mask in hf_batches:
            hf.torch_mask_tokens(input_ids, special_tokens_mask)

    mask_seconds = alternate({"bert-mlm mask_tokens": ours_mask, "HF torch_mask_tokens": hf_mask}, repeats)

    def to_rate(seconds: dict[str, list[float]]) -> dict[str, list[float]]:
        return {name: [tokens / s for s in values] for name, values in seconds.items()}

    setup = (f"{batches} batches of {batch_size} packed Gutenberg sequences ({tokens:,} tokens), "
             f"{repeats} alternating repeats")
    return [
        rate_table("Masking: per-batch data path (sequences -> masked tensors)", to_rate(path_seconds),
                   "HF collator, with special_tokens_mask (run_mlm)", "tokens/s", [setup]),
        rate_table("Masking: the masking function alone, on padded batches", to_rate(mask_seconds),
                   "HF torch_mask_tokens", "tokens/s", [setup]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for table in run(prepare(args.corpus), args.repeats):
        print(table.markdown())


if __name__ == "__main__":
    main()
