"""Word boundaries for whole-word masking.

A token *continues* a word when it is not the word's first piece. Two sources:

- ``wordpiece``: a ``##`` piece continues the word before it (Google's BERT and fairseq's
  whole-word masking for space-separated text). A property of the token id, looked up per batch:
  nothing is stored.
- ``jieba``: Chinese has no spaces and BERT gives every CJK character its own token, so the words
  come from a segmenter (Chinese BERT-wwm, Cui et al. 2019; Hugging Face's ``run_chinese_ref.py``
  reference files). A token continues a word when its first character is not where a jieba word
  starts. These flags are computed once per corpus and stored beside the token stream, one bit per
  token, so that masking a batch stays a table lookup.

``auto`` picks jieba when most of the text's letters are CJK characters.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bert_mlm.config import DataConfig
from bert_mlm.config.masking import SEGMENTERS
from bert_mlm.core.corpus import SPLITS, cjk_characters
from bert_mlm.core.documents import DocumentShards
from bert_mlm.core.engine import open_engine
from bert_mlm.core.errors import UserError
from bert_mlm.core.progress import Progress
from bert_mlm.core.tokenizer import CJK_MAJORITY, encoding_backend

logger = logging.getLogger(__name__)

WORDS_SUFFIX = "words.bits"


def cjk_share(texts: Iterable[str]) -> float:
    """Share of CJK characters among the letters (whitespace, digits and punctuation left out)."""
    cjk = letters = 0
    for text in texts:
        cjk += cjk_characters(text)
        letters += sum(map(str.isalpha, text))
    return cjk / letters if letters else 0.0


def resolve_segmenter(segmenter: str, sample: Iterable[str]) -> str:
    """``auto`` -> ``jieba`` when most letters of ``sample`` are CJK, else ``wordpiece``."""
    if segmenter not in SEGMENTERS:  # a library caller's value (the parameters' is checked by its type)
        raise UserError(f"masking.word_segmenter: {segmenter!r} is not one of {SEGMENTERS}")
    if segmenter != "auto":
        return segmenter
    return "jieba" if cjk_share(sample) > CJK_MAJORITY else "wordpiece"


def continuation_ids(vocabulary: dict[str, int]) -> np.ndarray:
    """Ids of the WordPiece pieces that continue a word (``##...``)."""
    return np.asarray(sorted(i for token, i in vocabulary.items() if token.startswith("##") and len(token) > 2),
                      dtype=np.int64)


@functools.lru_cache(maxsize=1)
def _jieba():
    import jieba  # imported on first use: it builds its prefix dictionary (~0.5 s)

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def segment_texts(texts: list[str], tokenizer_json: str, separator_id: int, dtype: str) -> tuple[np.ndarray, bytes]:
    """Continuation flags of every token of ``texts`` in the token store's layout (documents
    without tokens left out, a ``False`` for the separator after each document), and the token
    ids' bytes as the store holds them (so the caller can check both streams are the same).

    A pure function of its arguments, run on the data engine's worker processes: jieba is
    pure Python (~0.4 M characters per second per core, measured on ChnSentiCorp).
    """
    jieba = _jieba()
    tokenizer = encoding_backend(tokenizer_json)
    flags: list[np.ndarray] = []
    ids: list[np.ndarray] = []
    for text in texts:
        # One text at a time: ``encode_batch`` would use the Rust thread pool, which deadlocks in
        # a forked worker when TOKENIZERS_PARALLELISM=true (jieba is the cost here anyway).
        encoding = tokenizer.encode(text, add_special_tokens=False)
        if not encoding.ids:
            continue
        word_start = np.zeros(len(text) + 1, dtype=bool)
        word_start[[start for _, start, _ in jieba.tokenize(text)]] = True
        token_start = np.fromiter((start for start, _ in encoding.offsets), dtype=np.int64, count=len(encoding.ids))
        flags.append(np.append(~word_start[token_start], False))
        ids.append(np.asarray(encoding.ids, dtype=np.int64))
        ids.append(np.asarray([separator_id], dtype=np.int64))
    if not flags:
        return np.zeros(0, dtype=bool), b""
    return np.concatenate(flags), np.concatenate(ids).astype(dtype).tobytes()


class BitWriter:
    """Appends booleans to a file as packed bits (little bit order), whatever the chunk sizes."""

    def __init__(self, path: Path):
        self.handle = open(path, "wb")
        self.pending = np.zeros(0, dtype=bool)
        self.count = 0

    def write(self, flags: np.ndarray) -> None:
        flags = np.concatenate([self.pending, np.asarray(flags, dtype=bool)])
        whole = len(flags) - len(flags) % 8
        self.handle.write(np.packbits(flags[:whole], bitorder="little").tobytes())
        self.pending = flags[whole:]
        self.count += whole

    def close(self) -> int:
        if len(self.pending):
            self.handle.write(np.packbits(self.pending, bitorder="little").tobytes())
        total = self.count + len(self.pending)
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        return total


def words_path(directory: Path, split: str) -> Path:
    return directory / f"{split}.{WORDS_SUFFIX}"


@dataclass
class WordSegmentationJob:
    """Segment every split with jieba and write the continuation bits beside the sequence index;
    run by the ``sequence_index`` dataset on save, chunk by chunk on the data engine."""

    documents: DocumentShards
    tokenizer_json: str
    separator_id: int
    dtype: str
    store_digests: dict[str, str]
    store_tokens: dict[str, int]
    data: DataConfig
    mixture_factors: dict[str, float] | None = None  # the encoder's: the store's training stream

    @classmethod
    def for_store(cls, documents: DocumentShards, tokenizer, store, data: DataConfig) -> WordSegmentationJob:
        """The job for ``store`` (a :class:`~bert_mlm.core.token_store.TokenStore` encoded from
        ``documents`` with ``tokenizer``); its digests make the written bits refuse another store."""
        return cls(
            documents=documents,
            tokenizer_json=tokenizer.backend_tokenizer.to_str(),
            separator_id=tokenizer.sep_token_id,
            dtype=store.dtype.name,
            store_digests={split: store.digest(split) for split in SPLITS},
            store_tokens={split: store.split(split).num_tokens for split in SPLITS},
            data=data,
            mixture_factors=store.manifest.get("mixture_factors"),
        )

    def write(self, directory: Path) -> dict[str, int]:
        total = sum(self.documents.characters(split) for split in SPLITS)
        progress = Progress(total, "word segmentation (jieba)", unit="chars")
        written = {}
        try:
            with open_engine(self.data) as engine:
                for split in SPLITS:
                    written[split] = self._write_split(engine, split, directory, progress)
        finally:
            progress.close()
        return written

    def _write_split(self, engine, split: str, directory: Path, progress: Progress) -> int:
        writer = BitWriter(words_path(directory, split))
        digest = hashlib.blake2b(digest_size=10)  # the store's digest: the same tokens, or an error
        for flags, ids in engine.map_ordered(
            segment_texts,
            self.documents.iter_texts(split, progress=progress, factors=self.mixture_factors),
            self.tokenizer_json,
            self.separator_id,
            self.dtype,
        ):
            writer.write(flags)
            digest.update(ids)
        count = writer.close()
        if count != self.store_tokens[split] or digest.hexdigest() != self.store_digests[split]:
            raise UserError(
                f"word segmentation: the {split} split of corpus_documents does not encode to the token "
                "store's tokens; run the data stages again so that both come from one run"
            )
        return count

