"""The tokenization stage's work on the document shards, which the catalog's datasets run when they
save (or not at all, when a stored version has the same recipe: core/data/reuse.py): the vocabulary
trained on the train split (:class:`TokenizerJob`) and every split encoded into a token store
(:class:`EncodingJob`)."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tokenizers

from bert_mlm.config import DataConfig, TokenizerConfig
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.data.corpus import SPLITS, in_pieces
from bert_mlm.core.data.documents import DocumentShards, characters
from bert_mlm.core.data.engine import Finished, open_engine
from bert_mlm.core.data.reuse import code_digest
from bert_mlm.core.tokens.cjk_encoding import fast_encoder
from bert_mlm.core.tokens.token_store import TokenStoreWriter, encode_texts, vocabulary_digest
from bert_mlm.core.tokens.tokenizer import CJK_MAJORITY, train_wordpiece
from bert_mlm.core.tokens.words import SEGMENTER_SAMPLE_CHARS, WORD_SCHEMES, cjk_share, segment_texts

if TYPE_CHECKING:  # transformers imports torch: not in the encoding workers
    from transformers import BertTokenizerFast

logger = logging.getLogger(__name__)


# Settings that never change a trained vocabulary: the [UNK] warning is measured on an inherited
# one only, so a new threshold does not train the vocabulary again (extend_vocabulary stays in the
# recipe: it is refused without an inherited vocabulary, and would change the tokenizer if it were not).
NOT_IN_TRAINED_VOCABULARY = frozenset({"unk_warning_rate"})


@dataclass
class TokenizerJob:
    """Train the vocabulary on the train split of ``documents`` (an evenly spread sample of
    ``tokenizer.training_sample_bytes`` when larger); run by the ``tokenizer`` dataset on save, or
    not at all when a stored version has the same recipe (core/data/reuse.py)."""

    documents: DocumentShards
    config: TokenizerConfig
    data: DataConfig

    def recipe(self) -> dict:
        return {"stage": "tokenizer",
                "code": code_digest("bert_mlm.core.tokens.tokenizer", "bert_mlm.core.tokens.tokenization"),
                "tokenizers": tokenizers.__version__, "documents": self.documents.identity,
                "tokenizer": self.config.model_dump(exclude=NOT_IN_TRAINED_VOCABULARY)}

    def build(self) -> BertTokenizerFast:
        config, documents = self.config, self.documents
        fraction = sample_fraction(documents, config)
        tokenizer = train_wordpiece(training_passes(documents, fraction), config)
        logger.info("Trained a WordPiece vocabulary of %d tokens on %s of the train split (%.0f MB)", len(tokenizer),
                    f"{fraction:.1%}" if fraction else "all", documents.utf8_bytes("train") / 1e6)
        return tokenizer


def sample_fraction(documents, config: TokenizerConfig) -> float | None:
    """The share of the train split that a vocabulary is trained or measured on: an evenly spread
    ``tokenizer.training_sample_bytes`` of a larger split (``None``: all of it)."""
    train_bytes = documents.utf8_bytes("train")
    sample = config.training_sample_bytes
    return sample / train_bytes if sample and train_bytes > sample else None


def train_texts(documents, fraction: float | None, label: str):
    """One pass over the train split's texts (or their sample), its progress in characters under ``label``."""
    progress = Progress(round(documents.characters("train") * (fraction or 1.0)), label, unit="chars")
    try:
        yield from documents.iter_texts("train", fraction, progress=progress)
    finally:
        progress.close()


def training_passes(documents, fraction: float | None):
    """The train split's texts for :func:`train_wordpiece`, which reads them twice (the alphabet,
    then the vocabulary), each pass with its progress in characters: on a large corpus each pass
    takes minutes, and the trainer itself reports nothing."""
    passes = iter(["alphabet", "vocabulary"])

    def one_pass():
        what = next(passes, "vocabulary")
        yield from train_texts(documents, fraction,
                               f"tokenizer training: {what} (pass {1 if what == 'alphabet' else 2} of 2)")
        if what == "vocabulary":
            logger.info("tokenizer training: text read; computing the vocabulary (no progress from the trainer)")

    return one_pass


def encode_source_texts(item: tuple[str, list[str]], tokenizer_json: str, separator_id: int,
                        dtype: str, word_segmenter: str | None = None) -> tuple[str, int, tuple]:
    """:func:`encode_texts` of one source's texts (``item``: its name and texts), returning the name
    and how many texts were read (what the store writer counts per source, carried with the work
    rather than beside it) with the tokens and the document lengths, and, with ``word_segmenter``,
    each token's word-continuation flag (:func:`~bert_mlm.core.tokens.words.segment_texts`)."""
    name, texts = item
    if word_segmenter is not None:
        return name, len(texts), segment_texts(texts, tokenizer_json, separator_id, dtype, word_segmenter)
    return name, len(texts), encode_texts(texts, tokenizer_json, separator_id, dtype)


@dataclass
class EncodingJob:
    """Encode document shards into a token store; run by the catalog's store dataset on save,
    so the token ids are written as they are made, never held.

    A mixture's train split is stored as its documents once each, source after source (no weight is
    applied here: training samples each source in proportion to its weight, per epoch); the
    manifest's ``sources`` gives each source's documents and tokens, so its range of the stream."""

    documents: DocumentShards
    tokenizer_json: str
    vocabulary: dict[str, int]
    separator_id: int
    data: DataConfig
    # rjieba or jieba: their word boundaries are computed in the same pass and stored beside the
    # tokens (whole-word masking on Chinese words); None: none stored.
    word_segmenter: str | None = None

    def recipe(self) -> dict:
        """What determines the store (core/data/reuse.py): the documents' version, the tokenizer, the
        word boundaries, the code."""
        return {"stage": "token_store", "documents": self.documents.identity,
                "code": code_digest("bert_mlm.core.tokens.token_store", "bert_mlm.core.tokens.tokenization",
                                    "bert_mlm.core.data.documents", "bert_mlm.core.tokens.words"),
                "tokenizer": hashlib.blake2b(self.tokenizer_json.encode(), digest_size=10).hexdigest(),
                "words": WORD_SCHEMES[self.word_segmenter] if self.word_segmenter else None}

    def vectorised(self) -> bool:
        """Whether the encoding runs on the worker processes: mostly-CJK text with a BERT-shaped
        tokenizer is encoded by core/tokens/cjk_encoding.py, in Python and NumPy (one core each); other
        text by ``tokenizers``, which uses every core in this process."""
        return (fast_encoder(self.tokenizer_json) is not None
                and cjk_share(self.documents.sample_texts("train", SEGMENTER_SAMPLE_CHARS)) > CJK_MAJORITY)

    def write(self, directory: str | os.PathLike) -> dict:
        vocab_size = max(self.vocabulary.values()) + 1
        writer = TokenStoreWriter(directory, vocab_size, self.separator_id)
        total = sum(self.documents.characters(split) for split in SPLITS)
        segmenter = self.word_segmenter
        progress = Progress(total, f"encoding and word segmentation ({segmenter})" if segmenter else "encoding",
                            unit="chars")
        sources: dict[str, dict[str, int]] = {}
        # Segmenting is Python and NumPy on the worker processes, whatever the text.
        vectorised = segmenter is not None or self.vectorised()
        try:
            with open_engine(self.data) as engine:
                for split in SPLITS:
                    read = {"texts": 0}
                    items = self.documents.iter_source_texts(split)
                    if vectorised:  # on the worker processes: pieces that keep every one busy
                        size = engine.piece_chars
                        items = ((name, piece) for name, texts in items for piece in in_pieces(texts, size))
                    encoded = engine.map_ordered(encode_source_texts, items, self.tokenizer_json, self.separator_id,
                                                 writer.dtype.name, segmenter, python_bound=vectorised,
                                                 finished=Finished(progress, lambda item: characters(item[1])))
                    counted = _per_source(encoded, read, sources if split == "train" else {})
                    written = writer.write_split(split, counted, words=segmenter is not None)
                    written["documents_without_tokens"] = read["texts"] - written["documents"]
        finally:
            progress.close()
        extra: dict = {"vocabulary_digest": vocabulary_digest(self.vocabulary)}
        if segmenter is not None:
            extra |= {"word_segmenter": segmenter, "word_scheme": WORD_SCHEMES[segmenter]}
        if self.documents.sources is not None:
            extra["sources"] = [{"name": name, **counts} for name, counts in sources.items()]
        return writer.close(extra)


def _per_source(encoded: Iterator[tuple[str, int, tuple]], read: dict[str, int],
                sources: dict[str, dict[str, int]]) -> Iterator[tuple]:
    """The store writer's (tokens, lengths[, word flags]), counting the texts read and, into
    ``sources``, each source's documents and stream tokens (separators included: its range of the
    stream)."""
    for name, texts, work in encoded:
        tokens, lengths = work[0], work[1]
        read["texts"] += texts
        counts = sources.setdefault(name, {"documents": 0, "tokens": 0})
        counts["documents"] += len(lengths)
        counts["tokens"] += len(tokens)
        yield work
