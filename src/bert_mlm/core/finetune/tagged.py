"""A token-tagged task (named entities): which kind of task a file holds, reading it, the hash
split, the tags in IOB2 and their label list, and every input check.

Formats: CoNLL-style text (a token and its tag per line, the tag last, as CoNLL-2003's middle
columns have it; a blank line between sentences), and JSONL / JSON / Parquet tables with a list of
tokens and a list of tags per row (``finetune.tokens_column`` / ``tag_column``, as Hugging Face's
``run_ner.py`` reads them; integer tags named by the label list a Parquet file saved by ``datasets``
carries); compressed as the corpus reader reads them. Every check runs before any model trains,
each one line naming the file and the line (or row).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Literal

import fsspec
import numpy as np
import pandas as pd

from bert_mlm.config import FinetuneConfig
from bert_mlm.core.data.sources.listing import compression_of, format_suffix
from bert_mlm.core.finetune.labelled import read_table, split_and_sample
from bert_mlm.core.finetune.tag_schemes import TAG_HELP, entity_type, is_tag, tag_labels, to_iob2
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

TABLE_SUFFIXES = (".parquet", ".jsonl", ".json")
CONLL_SUFFIXES = (".conll", ".bio", ".iob", ".iob2", ".iobes", ".bioes", ".bilou", ".ner")
HEAD_BYTES = 65536  # what the CoNLL detection looks at
CONLL_SHARE = 0.9  # the share of a head's lines that must be "token ... tag" for a file of another suffix to be CoNLL


@dataclass(frozen=True)
class TaskKind:
    """Sequence or token classification, and why (the node logs it)."""

    kind: Literal["sequence", "token"]
    reason: str


def task_kind(config: FinetuneConfig) -> TaskKind:
    """What ``finetune.task`` asks for; ``auto`` decides from ``finetune.train_path``'s content."""
    if config.task != "auto":
        return TaskKind(config.task, f"finetune.task is {config.task}")
    path, suffix = config.train_path, format_suffix(config.train_path)
    if suffix in CONLL_SUFFIXES:
        return TaskKind("token", f"{path!r} is named {suffix}: a CoNLL-style token and tag per line")
    if suffix in TABLE_SUFFIXES:
        lists = _list_columns(path, suffix)
        wanted = (config.tokens_column, config.tag_column)
        if all(lists.get(column) for column in wanted):
            return TaskKind("token", f"{path!r} has list-valued columns {wanted[0]!r} and {wanted[1]!r} "
                                     "(finetune.tokens_column, finetune.tag_column)")
        return TaskKind("sequence", f"{path!r} has no list-valued columns {wanted[0]!r} and {wanted[1]!r}: a label "
                                    "per text")
    if suffix != ".csv" and (evidence := _conll_evidence(*_head(path))):
        return TaskKind("token", f"{path!r} reads as CoNLL: {evidence}")
    return TaskKind("sequence", f"{path!r} is a {suffix or 'suffix-less'} table, not CoNLL-style token and tag lines")


def _open(path: str):
    return fsspec.open(path, "rb", compression=compression_of(path))


def _head(path: str) -> tuple[str, bool]:
    """The file's first ``HEAD_BYTES`` as text, and whether that is the whole file."""
    with _open(path) as handle:
        data = handle.read(HEAD_BYTES)
    return data.decode("utf-8", errors="replace"), len(data) < HEAD_BYTES


def _fields(line: str) -> list[str]:
    """A CoNLL line's columns: tab-separated when it has a tab (a token may be a space), else
    whitespace-separated."""
    return line.split("\t") if "\t" in line else line.split()


def _conll_evidence(head: str, whole: bool) -> str | None:
    """Why ``head`` (a file's start, ``whole`` or not) is CoNLL-style, or ``None``: no header,
    most lines 2+ columns ending in a tag, blank lines between sentences."""
    lines = head.split("\n") if whole else head.split("\n")[:-1]  # the last line may be cut
    rows = [line.rstrip("\r") for line in lines if line.strip() and not line.startswith("-DOCSTART-")]
    blocks = sum(1 for before, after in zip(lines, lines[1:], strict=False) if not before.strip() and after.strip())
    tagged = sum(1 for row in rows if len(fields := _fields(row)) >= 2 and is_tag(fields[-1].strip()))
    if len(rows) < 2 or blocks == 0 or tagged < CONLL_SHARE * len(rows):
        return None
    return (f"no header, {tagged} of its first {len(rows)} lines are 2+ columns ending in a tag ({TAG_HELP}), "
            "blank lines between sentences")


def _list_columns(path: str, suffix: str) -> dict[str, bool]:
    """Which columns of a table hold lists (its first row, or a Parquet file's schema)."""
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            schema = pq.read_schema(path)
        except (OSError, pa.ArrowException) as error:
            raise UserError(f"finetune.train_path: {path!r} cannot be read as Parquet ({error})") from error
        return {f.name: pa.types.is_list(f.type) or pa.types.is_large_list(f.type) for f in schema}
    try:
        if suffix == ".jsonl":
            with _open(path) as handle:
                first = next((line for line in handle if line.strip()), b"{}")
            record = json.loads(first)
        else:
            records = json.loads(_read_text(path, "finetune.train_path"))
            record = records[0] if isinstance(records, list) and records else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"finetune.train_path: {path!r} is not JSON ({error})") from error
    return {key: isinstance(value, list) for key, value in record.items()} if isinstance(record, dict) else {}


def _read_text(path: str, parameter: str) -> str:
    with _open(path) as handle:
        data = handle.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UserError(f"{parameter}: {path!r} is not UTF-8 text (byte {error.start}: {error.reason})") from error


def read_tagged(path: str, config: FinetuneConfig, parameter: str) -> pd.DataFrame:
    """The sentences of one token-tagged file: ``tokens`` and ``tags`` (lists of text, tags as
    written) and ``line``, where the sentence starts (its line, or its row in a table)."""
    suffix = format_suffix(path)
    if suffix == ".csv":
        raise UserError(f"{parameter}: {path!r} is CSV, whose cells hold no lists; a token task reads CoNLL-style "
                        "text (a token and its tag per line) or JSONL / Parquet with lists of tokens and tags")
    frame = _read_table(path, suffix, config, parameter) if suffix in TABLE_SUFFIXES else _read_conll(path, parameter)
    if frame.empty:
        raise UserError(f"{parameter}: {path!r} holds no tagged sentence")
    return frame


def _bad_tag(path: str, parameter: str, tag: str, where: str) -> UserError:
    return UserError(f"{parameter}: {path!r} {where}: the tag {tag!r} is not {TAG_HELP}")


def _read_conll(path: str, parameter: str) -> pd.DataFrame:
    lines = _read_text(path, parameter).split("\n")
    sentences, tokens, tags, first = [], [], [], 0
    for number, line in enumerate(lines, 1):  # a Python loop: ~1 s for MSRA's 2 million lines
        line = line.rstrip("\r")
        if not line.strip() or line.startswith("-DOCSTART-"):
            if tokens:
                sentences.append((tokens, tags, first))
                tokens, tags = [], []
            continue
        fields = _fields(line)
        tag = fields[-1].strip() if len(fields) > 1 else ""
        if not tag:
            raise UserError(f"{parameter}: {path!r} line {number}: {line[:60]!r} has no tag column; a CoNLL-style "
                            "line is a token and its tag, tab- or space-separated, the tag last")
        if not tokens:
            first = number
        tokens.append(fields[0])
        tags.append(tag)
    if tokens:
        sentences.append((tokens, tags, first))
    frame = pd.DataFrame(sentences, columns=["tokens", "tags", "line"])
    # The tags are checked by their distinct values; a bad one is then looked up for its line.
    bad = next((tag for tag in pd.unique(pd.Series([t for s in frame["tags"] for t in s], dtype=object))
                if not is_tag(tag)), None)
    if bad is not None:
        number = next(n for n, line in enumerate(lines, 1) if line.strip() and _fields(line.rstrip("\r"))[-1].strip()
                      == bad and not line.startswith("-DOCSTART-"))
        raise _bad_tag(path, parameter, bad, f"line {number}")
    return frame


def _tag_names(path: str, suffix: str, column: str) -> list[str] | None:
    """The names of integer tags: the ClassLabel of a Parquet file saved by Hugging Face ``datasets``."""
    if suffix != ".parquet":
        return None
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    try:
        features = json.loads(metadata[b"huggingface"])["info"]["features"]
        return list(features[column]["feature"]["names"])
    except (KeyError, TypeError, ValueError):
        return None


def _read_table(path: str, suffix: str, config: FinetuneConfig, parameter: str) -> pd.DataFrame:
    tokens_column, tag_column = config.tokens_column, config.tag_column
    table = read_table(path, suffix, {"tokens_column": tokens_column, "tag_column": tag_column}, parameter)
    names = _tag_names(path, suffix, tag_column)
    rows, empty = [], 0
    for row, (tokens, tags) in enumerate(zip(table[tokens_column], table[tag_column], strict=True), 1):
        where = f"row {row}"
        if not isinstance(tokens, list | np.ndarray) or not isinstance(tags, list | np.ndarray):
            raise UserError(f"{parameter}: {path!r} {where}: columns {tokens_column!r} and {tag_column!r} must hold "
                            f"lists (of tokens and of their tags), not {type(tokens).__name__} and "
                            f"{type(tags).__name__}")
        if len(tokens) != len(tags):
            raise UserError(f"{parameter}: {path!r} {where}: {len(tokens)} tokens but {len(tags)} tags")
        if not len(tokens):
            empty += 1
            continue
        tags = [_tag_text(tag, names, path, parameter, where) for tag in tags]
        rows.append(([str(token) for token in tokens], tags, row))
    if empty:
        logger.warning("%s: %d of the %d rows of %r have no token; skipped", parameter, empty, len(table), path)
    return pd.DataFrame(rows, columns=["tokens", "tags", "line"])


def _tag_text(tag, names: list[str] | None, path: str, parameter: str, where: str) -> str:
    if isinstance(tag, int | np.integer):
        if names is None:
            raise UserError(f"{parameter}: {path!r} {where}: integer tags ({tag}) without their names (a Parquet "
                            "file saved by Hugging Face datasets carries them); write the tags as text (B-PER)")
        if not 0 <= tag < len(names):
            raise UserError(f"{parameter}: {path!r} {where}: the tag id {tag} is not one of the {len(names)} names")
        tag = names[tag]
    if not isinstance(tag, str) or not is_tag(tag):
        raise _bad_tag(path, parameter, str(tag), where)
    return tag


@dataclass
class TaggedTask:
    """The sentences of one token task, ``train`` and ``evaluation`` frames (``tokens``, ``tags``
    in IOB2, ``line``), the label list, and what reading them found (``notes``, to be logged)."""

    train: pd.DataFrame
    evaluation: pd.DataFrame
    labels: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def label_ids(self) -> dict[str, int]:
        return {label: index for index, label in enumerate(self.labels)}

    @property
    def entity_types(self) -> list[str]:
        return sorted({entity_type(label) for label in self.labels} - {None})

    def tag_ids(self, frame: pd.DataFrame) -> list[list[int]]:
        index = self.label_ids
        return [[index[tag] for tag in tags] for tags in frame["tags"]]

    def label_mapping(self) -> dict:
        """What the catalog saves beside the metrics (and the tagger's config carries)."""
        counts = pd.Series([t for tags in self.train["tags"] for t in tags if t.startswith("B-")]).value_counts()
        return {"label_to_id": self.label_ids, "id_to_label": dict(enumerate(self.labels)),
                "train_entities": {kind: int(counts.get(f"B-{kind}", 0)) for kind in self.entity_types}}

    def fingerprint(self) -> str:
        digest = hashlib.blake2b(digest_size=8)
        for frame in (self.train, self.evaluation):
            for tokens, tags in zip(frame["tokens"], frame["tags"], strict=True):
                digest.update("\x1f".join(tokens).encode() + b"\x1e" + "\x1f".join(tags).encode() + b"\x1d")
        return digest.hexdigest()


def load_tagged_task(config: FinetuneConfig) -> TaggedTask:
    """Read, convert to IOB2, split, subsample and check the tagged sentences (see the module's
    docstring); ``notes`` say which schemes were converted and what the strict IOB2 reading skips."""
    notes: list[str] = []
    train = _in_iob2(read_tagged(config.train_path, config, "finetune.train_path"), config.train_path, notes)
    evaluation = _in_iob2(read_tagged(config.eval_path, config, "finetune.eval_path"), config.eval_path, notes) \
        if config.eval_path else None
    train, evaluation = split_and_sample(train, evaluation, train["tokens"].map(" ".join), config, "sentences")
    train_tags = {tag for tags in train["tags"] for tag in tags}
    labels = tag_labels(train_tags)
    if len(labels) == 1:
        raise UserError(f"finetune.train_path: the {len(train)} training sentences of {config.train_path!r} tag no "
                        "entity (every tag is O); a tagger needs entities to learn")
    unseen = sorted({entity_type(t) for tags in evaluation["tags"] for t in tags} - {entity_type(t) for t in train_tags}
                    - {None})
    if unseen:
        raise UserError(f"finetune.eval_path: {len(unseen)} eval entity type(s) never occur among the training "
                        f"sentences ({', '.join(map(repr, unseen[:5]))}); the training types are "
                        f"{[label[2:] for label in labels[1::2]]}")
    return TaggedTask(train.reset_index(drop=True), evaluation.reset_index(drop=True), labels, notes)


def _in_iob2(frame: pd.DataFrame, path: str, notes: list[str]) -> pd.DataFrame:
    """``frame`` with its tags in IOB2; what was found and done appended to ``notes``."""
    tags, report = to_iob2(frame["tags"].tolist())
    notes.append(report.describe(repr(path)))
    return frame.assign(tags=tags)
