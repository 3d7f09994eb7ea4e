"""A labelled downstream task: reading CSV/TSV/Parquet/JSONL files, the hash split, the label
mapping, the token ids of each example, and every input check, run before any model trains, each
one message naming the parameter and the file.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from transformers import PreTrainedTokenizerBase

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.common.text import hash_unit
from bert_mlm.core.data.sources.listing import compression_of
from bert_mlm.errors import UserError, first_line

logger = logging.getLogger(__name__)

LABELLED_SUFFIXES = (".csv", ".tsv", ".parquet", ".jsonl", ".json")


def read_labelled(path: str, text_columns: tuple[str, ...], label_column: str, parameter: str) -> pd.DataFrame:
    """``text`` (and ``pair``) and ``label`` columns of one labelled file, rows with a missing
    value dropped (counted in a warning); labels as text (``1``, ``"1"`` and ``1.0`` read alike)."""
    suffix = Path(path).suffix.lower()
    if suffix not in LABELLED_SUFFIXES:
        raise UserError(f"{parameter}: {path!r} is not one of {', '.join(LABELLED_SUFFIXES)}")
    columns = {**dict(zip(("text_column", "pair_column"), text_columns, strict=False)), "label_column": label_column}
    frame = read_table(path, suffix, columns, parameter)[[*text_columns, label_column]]
    no_label = frame[label_column].isna()
    # A text of spaces only is no text (a CSV's empty cell reads as missing; Parquet and JSON keep "  ").
    blank = frame[list(text_columns)].apply(lambda column: column.isna() | column.astype(str).str.strip().eq(""))
    no_text = blank.any(axis=1) & ~no_label
    if no_label.any() or no_text.any():
        logger.warning("%s: %d of %d rows of %r dropped: %d without a label (column %r), %d without a text (%s)",
                       parameter, int(no_label.sum() + no_text.sum()), len(frame), path, int(no_label.sum()),
                       label_column, int(no_text.sum()), ", ".join(map(repr, text_columns)))
    frame = frame[~no_label & ~no_text]
    result = pd.DataFrame({"text": frame[text_columns[0]].astype(str)})
    if len(text_columns) > 1:
        result["pair"] = frame[text_columns[1]].astype(str)
    result["label"] = label_texts(frame[label_column])
    if result.empty:
        raise UserError(f"{parameter}: {path!r} has no labelled rows (every row lacks a text or a label)")
    return result.reset_index(drop=True)


def read_table(path: str, suffix: str, columns: Mapping[str, str], parameter: str) -> pd.DataFrame:
    """A labelled table (CSV / TSV, Parquet, JSON lines or JSON; compressed as its name says) that
    holds each of ``columns`` (``finetune.<key>``: the column it names); every failure one line."""
    try:
        if suffix == ".parquet":
            frame = pd.read_parquet(path)
        elif suffix in (".jsonl", ".json"):
            frame = pd.read_json(path, lines=suffix == ".jsonl", dtype=False, compression=compression_of(path))
        else:  # TSV: no quoting, as GLUE ships it (a review may start with a quote)
            frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", quoting=3 if suffix == ".tsv" else 0,
                                dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError as error:
        raise UserError(f"{parameter}: {path!r} is empty") from error
    except ValueError as error:
        raise UserError(f"{parameter}: {path!r} cannot be read ({first_line(error, 160)})") from error
    for key, column in columns.items():
        if column not in frame:
            raise UserError(f"finetune.{key}: {path!r} ({parameter}) has no column {column!r}; its columns are "
                            f"{list(frame.columns)}")
    return frame


def label_texts(labels: pd.Series) -> pd.Series:
    """Labels as text. A column whose every label is a whole number, however written (``1``,
    ``1.0``, ``"1.0"`` in a CSV, a Parquet float column), reads as integers: ``"0"``/``"1"``,
    never the classes ``"0.0"``/``"1.0"``; any other column as it is (whole floats among other
    labels lose their ``.0`` too)."""
    numbers = pd.to_numeric(labels, errors="coerce") if not pd.api.types.is_bool_dtype(labels) else None
    if numbers is not None and numbers.notna().all() and len(numbers) and (numbers % 1 == 0).all():
        return numbers.astype(np.int64).astype(str)
    return labels.map(lambda value: str(int(value)) if isinstance(value, float) and value.is_integer() else str(value))


def hash_fraction(texts: pd.Series, seed: int) -> np.ndarray:
    """A number in [0, 1) per text from a hash of it: the same split whatever the file's order."""
    return np.fromiter((hash_unit(f"{seed}:{t}") for t in texts), dtype=np.float64, count=len(texts))


@dataclass
class Task:
    """The examples of one labelled task: ``train`` and ``evaluation`` frames (``text``,
    optionally ``pair``, ``label`` as text) and the label of each class id."""

    train: pd.DataFrame
    evaluation: pd.DataFrame
    labels: list[str]
    source: FinetuneConfig  # the task's settings (its file, columns, split and sample)

    @property
    def label_ids(self) -> dict[str, int]:
        return {label: index for index, label in enumerate(self.labels)}

    def ids(self, frame: pd.DataFrame) -> np.ndarray:
        return frame["label"].map(self.label_ids).to_numpy(dtype=np.int64)

    def label_mapping(self) -> dict:
        """What the catalog saves beside the metrics (and the classifier's config carries)."""
        counts = self.train["label"].value_counts()
        return {
            "label_to_id": self.label_ids,
            "id_to_label": dict(enumerate(self.labels)),
            "label_column": self.source.label_column,
            "train_counts": {label: int(counts.get(label, 0)) for label in self.labels},
        }

    def fingerprint(self) -> str:
        digest = hashlib.blake2b(digest_size=8)
        for frame in (self.train, self.evaluation):
            digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
        return digest.hexdigest()


def split_and_sample(train: pd.DataFrame, evaluation: pd.DataFrame | None, keys: pd.Series,
                     config: FinetuneConfig, unit: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The train and eval rows, sampled to ``max_train_examples`` / ``max_eval_examples``; without an
    eval file, ``eval_fraction`` of the train file held out by a hash of each row's ``keys`` (its text):
    stable whatever the file order, and duplicates never straddle the two."""
    if evaluation is None:
        held_out = hash_fraction(keys, config.seed) < config.eval_fraction
        train, evaluation = train[~held_out], train[held_out]
        if evaluation.empty or train.empty:
            raise UserError(f"finetune.eval_fraction: {config.eval_fraction} of {len(held_out)} {unit} of "
                            f"{config.train_path!r} leaves an empty {'eval' if evaluation.empty else 'train'} split")
    return (train.sample(min(len(train), config.max_train_examples), random_state=config.seed),
            evaluation.sample(min(len(evaluation), config.max_eval_examples), random_state=config.seed))


def load_task(source: FinetuneConfig) -> Task:
    """Read, split, subsample and check the labelled examples (see the module's docstring)."""
    columns = (source.text_column, *((source.pair_column,) if source.pair_column else ()))
    train = read_labelled(source.train_path, columns, source.label_column, "finetune.train_path")
    eval_columns = (source.eval_text_column or source.text_column, *columns[1:])
    evaluation = read_labelled(source.eval_path, eval_columns, source.label_column, "finetune.eval_path") \
        if source.eval_path else None
    train, evaluation = split_and_sample(train, evaluation, train["text"], source, "examples")
    check_labels(train, evaluation, source)
    labels = sorted(train["label"].unique(), key=_label_order)
    return Task(train.reset_index(drop=True), evaluation.reset_index(drop=True), labels, source)


def _label_order(label: str):
    """Numeric labels in numeric order (2 before 10), then any others alphabetically."""
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


def check_labels(train: pd.DataFrame, evaluation: pd.DataFrame, source: FinetuneConfig) -> None:
    classes = train["label"].nunique()
    where = f"{source.train_path!r} (column {source.label_column!r})"
    if classes < 2:
        raise UserError(f"finetune.label_column: {where} has one class only ({train['label'].iloc[0]!r}) among "
                        f"its {len(train)} training examples; a classifier needs at least two")
    if 2 * classes > len(train):
        raise UserError(f"finetune.label_column: {where} has {classes} classes among {len(train)} training examples "
                        "(fewer than two examples per class): is it the label column? Raise "
                        "finetune.max_train_examples or give more labelled examples")
    unseen = sorted(set(evaluation["label"]) - set(train["label"]))
    if unseen:
        shown = ", ".join(repr(u) for u in unseen[:5]) + (" ..." if len(unseen) > 5 else "")
        raise UserError(f"finetune.eval_path: {len(unseen)} eval label(s) never occur among the training examples "
                        f"({shown}); the training labels are {sorted(train['label'].unique())[:10]}")


@dataclass
class EncodedExamples:
    """Token ids (and segment ids) of each example, unpadded, with their class ids."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self.input_ids), dtype=np.int64, count=len(self.input_ids))


def encode_examples(task: Task, frame: pd.DataFrame, tokenizer: PreTrainedTokenizerBase,
                    max_length: int) -> EncodedExamples:
    """``[CLS] text [SEP]`` (or ``[CLS] text [SEP] pair [SEP]``), cut to ``max_length`` tokens
    (the longer text first), encoded once; batches pad them later."""
    pairs = frame["pair"].tolist() if "pair" in frame else None
    encoded = tokenizer(frame["text"].tolist(), pairs, truncation=True, max_length=max_length,
                        return_token_type_ids=True, return_attention_mask=False)
    return EncodedExamples(encoded["input_ids"], encoded["token_type_ids"], task.ids(frame))
