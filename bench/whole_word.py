"""Whole-word masking: its cost per batch, the one-off jieba segmentation, and what it does to
accuracy at equal budget, on English (Gutenberg, WordPiece words) and Chinese (ChnSentiCorp
reviews, jieba words).

    python bench/whole_word.py --steps 300 --seeds 2

Throughput: the per-batch data path (sequences -> padded, masked tensors) with token-level and
with whole-word masking, alternating, medians; Hugging Face's
`DataCollatorForLanguageModeling(whole_word_mask=True)` (transformers 5: words from character
offsets) on the same texts as the alternative. Accuracy: the same model, initial weights, data,
steps and batch, trained with token-level or whole-word masking (several training seeds), each
scored on the test split with the token-level fixed protocol and with the whole-word one.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _timing import Table, alternate, rate_table
from transformers import DataCollatorForLanguageModeling

from bert_mlm.config import (
    CorpusConfig,
    MaskingConfig,
    SequenceConfig,
    TokenizerConfig,
)
from bert_mlm.core.data.corpus import SPLITS, clean_documents
from bert_mlm.core.data.sources import read_corpus
from bert_mlm.core.model.masking import mask_generator, mask_tokens
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.sequences import build_sequence_index
from bert_mlm.core.tokens.token_store import write_token_store
from bert_mlm.core.tokens.tokenizer import train_wordpiece
from bert_mlm.core.tokens.words import BitWriter, resolve_segmenter, segment_texts, words_path

MAX_LENGTH = 128


@dataclass
class Corpus:
    name: str
    texts: dict[str, list[str]]
    tokenizer: object
    sequences: dict
    segmenter: str
    segment_seconds: float
    encode_seconds: float


def prepare(name: str, path: str, text_column: str, vocab_size: int, workdir: Path) -> Corpus:
    documents, _ = clean_documents(read_corpus(path, text_column), ratios=CorpusConfig().split_ratios)
    texts = {s: documents.loc[documents["split"] == s, "text"].tolist() for s in SPLITS}
    tokenizer = train_wordpiece(texts["train"], TokenizerConfig(vocab_size=vocab_size, base_alphabet="none"))
    started = time.perf_counter()
    store = write_token_store(workdir / name / "store", texts, tokenizer)
    encode_seconds = time.perf_counter() - started
    segmenter = resolve_segmenter("auto", texts["train"][:2000])
    index = build_sequence_index(store, SequenceConfig(max_length=MAX_LENGTH), SPLITS, segmenter)
    segment_seconds = 0.0
    if segmenter == "jieba":
        started = time.perf_counter()
        index.words = {}
        serialised = tokenizer.backend_tokenizer.to_str()
        for split in SPLITS:
            path_of_bits = words_path(workdir / name, split)
            writer = BitWriter(path_of_bits)
            for start in range(0, len(texts[split]), 2000):
                _, _, flags = segment_texts(texts[split][start : start + 2000], serialised, tokenizer.sep_token_id,
                                         store.dtype.name)
                writer.write(flags)
            assert writer.close() == store.split(split).num_tokens
            index.words[split] = np.fromfile(path_of_bits, dtype=np.uint8)
        segment_seconds = time.perf_counter() - started
    sequences = {s: index.sequences(store, s, tokenizer.cls_token_id, tokenizer.sep_token_id) for s in SPLITS}
    return Corpus(name, texts, tokenizer, sequences, segmenter, segment_seconds, encode_seconds)


def throughput(corpus: Corpus, repeats: int, batches: int = 100, batch_size: int = 32) -> Table:
    ids = TokenIds.from_tokenizer(corpus.tokenizer)
    train = corpus.sequences["train"]
    rng = np.random.default_rng(0)
    picks = [rng.choice(len(train), batch_size, replace=False) for _ in range(batches)]
    tokens = int(sum(train.lengths[p].sum() for p in picks))
    token_collator = ids.collator(MAX_LENGTH)
    word_collator = ids.collator(MAX_LENGTH, whole_word=True)
    token_masking, word_masking = MaskingConfig(), MaskingConfig(whole_word=True)

    def ours(collator, masking):
        def run() -> None:
            for k, pick in enumerate(picks):
                batch = collator.collate(train, pick)
                mask_tokens(batch["input_ids"], batch["special_tokens_mask"], ids.mask, ids.replacement, masking,
                            mask_generator(0, 0, k), batch.get("word_starts"))
        return run

    # HF's whole-word path needs each example's character offsets, and its padding cannot pad
    # them: the texts tokenized as run_mlm does with --pad_to_max_length (one text per example),
    # batches with about as many real tokens.
    hf = DataCollatorForLanguageModeling(corpus.tokenizer, whole_word_mask=True, mlm_probability=0.15)
    encoded = corpus.tokenizer(
        corpus.texts["train"][:20_000],
        truncation=True,
        max_length=MAX_LENGTH,
        padding="max_length",
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    keys = ("input_ids", "attention_mask", "offset_mapping", "special_tokens_mask")
    examples = [{k: encoded[k][i] for k in keys} for i in range(len(encoded["input_ids"]))]
    hf_batches, hf_tokens, position = [], 0, 0
    while hf_tokens < tokens and position < len(examples):
        chunk = examples[position : position + batch_size]
        hf_batches.append(chunk)
        hf_tokens += sum(sum(e["attention_mask"]) for e in chunk)
        position += batch_size

    def hf_run() -> None:
        for chunk in hf_batches:
            hf([dict(e) for e in chunk])

    seconds = alternate({
        "token-level (Collator + mask_tokens)": ours(token_collator, token_masking),
        f"whole-word, {corpus.segmenter} words": ours(word_collator, word_masking),
        "HF collator, whole_word_mask=True": hf_run,
    }, repeats)
    rates = {
        name: [(hf_tokens if name.startswith("HF") else tokens) / s for s in values] for name, values in seconds.items()
    }
    notes = [
        f"{batches} batches of {batch_size} packed sequences ({tokens:,} tokens), {repeats} alternating repeats; "
        f"HF: {len(hf_batches)} batches of one text per example, padded to {MAX_LENGTH} ({hf_tokens:,} real tokens)"
    ]
    if corpus.segmenter == "jieba":
        notes.append(word_lengths(corpus))
        characters = sum(len(text) for split in SPLITS for text in corpus.texts[split])
        notes.append(
            f"One-off jieba segmentation of the corpus: {corpus.segment_seconds:.1f} s "
            f"({characters / corpus.segment_seconds / 1e6:.2f} M chars/s, "
            f"one process) vs {corpus.encode_seconds:.1f} s to encode it"
        )
    return rate_table(
        f"Whole-word masking cost: {corpus.name}", rates, "token-level (Collator + mask_tokens)", "tokens/s", notes
    )


def word_lengths(corpus: Corpus, texts: int = 2000) -> str:
    """Tokens per word under HF's rule (a word ends where the next token's offset leaves a gap)
    and under jieba's words, on the same texts."""
    tokenizer = corpus.tokenizer
    sample = corpus.texts["train"][:texts]
    hf_tokens = hf_words = 0
    for text in sample:
        offsets = tokenizer(text, add_special_tokens=False, truncation=True, max_length=MAX_LENGTH - 2,
                            return_offsets_mapping=True)["offset_mapping"]
        hf_tokens += len(offsets)
        hf_words += sum(1 for k, (start, _) in enumerate(offsets) if k == 0 or start != offsets[k - 1][1])
    _, _, flags = segment_texts(sample, tokenizer.backend_tokenizer.to_str(), tokenizer.sep_token_id, "int32")
    documents = sum(1 for text in sample if tokenizer(text, add_special_tokens=False)["input_ids"])
    tokens = len(flags) - documents  # without the separators
    return (f"Tokens per word on {texts:,} reviews: {hf_tokens / max(hf_words, 1):.2f} under HF's offset-gap rule, "
            f"{tokens / (tokens - int(flags.sum())):.2f} under jieba's words")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default="../shared")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-accuracy", action="store_true")
    args = parser.parse_args()
    for table in run(args.shared, args.repeats, args.steps, args.seeds, not args.skip_accuracy, echo=True):
        del table  # printed as it was made


def run(shared: str, repeats: int = 5, steps: int = 300, seeds: int = 2, with_accuracy: bool = True,
        echo: bool = False) -> list[Table]:
    shared_path = Path(shared)
    tables = []

    def add(table: Table) -> None:
        tables.append(table)
        if echo:
            print(table.markdown(), flush=True)

    with tempfile.TemporaryDirectory() as workdir:
        corpora = [
            prepare("Gutenberg (English)", str(shared_path / "corpora" / "gutenberg"), "text", 8192, Path(workdir)),
            prepare(
                "ChnSentiCorp (Chinese reviews)",
                str(shared_path / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv"),
                "review",
                8192,
                Path(workdir),
            ),
        ]
        for corpus in corpora:
            add(throughput(corpus, repeats))
        if with_accuracy:
            for corpus in corpora:
                from span_masking import SCHEMES, quality  # the schemes' quality at equal budget, these two

                add(quality(corpus, steps, seeds, {name: SCHEMES[name] for name in ("token", "whole-word")}))
    return tables


if __name__ == "__main__":
    main()
