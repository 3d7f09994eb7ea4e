"""``corpus``: where the texts are (read by the catalog's ``raw_corpus``) and how they are cleaned,
de-duplicated and split (read by the ingestion node). ``conf/base/parameters_corpus.yml`` is the
one home of every key: the catalog reads it through ``${globals:corpus...}`` (the settings load
the parameters files as globals too) and ``--params corpus.path=...`` reaches both."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from bert_mlm.config.base import Section
from bert_mlm.errors import UserError

SPLITS = ("train", "valid", "test")


def validate_split_ratios(ratios: dict[str, float]) -> dict[str, float]:
    """The three splits' shares, refused unless they are non-negative, sum to 1 and train > 0."""
    unknown = set(ratios) - set(SPLITS)
    if unknown:
        raise UserError(f"corpus.split_ratios: unknown split(s) {sorted(unknown)}; use {SPLITS}")
    values = {name: float(ratios.get(name, 0.0)) for name in SPLITS}
    if any(v < 0 for v in values.values()) or abs(sum(values.values()) - 1.0) > 1e-6:
        raise UserError(f"corpus.split_ratios: {values} must be non-negative and sum to 1 (they sum to "
                        f"{sum(values.values()):.4f})")
    if values["train"] <= 0:
        raise UserError("corpus.split_ratios: train must be > 0")
    return values


def check_one_source(path: Any, hf_dataset: Any, sources: Any) -> None:
    """At most one of ``corpus.path``, ``corpus.hf_dataset`` and ``corpus.sources`` is set."""
    given = [name for name, value in (("path", path), ("hf_dataset", hf_dataset), ("sources", sources))
             if value is not None]
    if len(given) > 1:
        raise UserError(f"corpus: give one of corpus.path, corpus.hf_dataset or corpus.sources, not "
                        f"{' and '.join('corpus.' + name for name in given)}")


class CorpusConfig(Section):
    """The corpus: where it is (read by the catalog's raw_corpus) and how it is cleaned and split"""

    SECTION = "corpus"

    path: str | None = Field(
        None, description="a text file, a folder, a glob or any fsspec URL (s3://, https://, hf://...), compressed "
                          "or not; null: the built-in offline corpus (Python standard-library docstrings)")
    text_column: str = Field(
        "text", min_length=1, description="the column holding the text in .csv / .tsv / .parquet / .jsonl files")
    credentials: str | None = Field(
        None, description="the name of an entry of conf/local/credentials.yml, for s3:// gs:// abfs:// ... paths")
    hf_dataset: dict[str, Any] | str | None = Field(
        None, description="a Hugging Face dataset: {name, config, split, text_column} or {path: <save_to_disk dir>}")
    sources: dict[str, Any] | list[Any] | None = Field(
        None, description="a mixture: {name: {path or hf_dataset, weight or repeat, credentials, text_column}, ...}; "
                          "the weights apply per training epoch (changing one re-runs no data stage)")
    min_words: int = Field(
        4, ge=1, description="drop text-file paragraphs with fewer words (headings, page numbers); a CJK character is "
                             "a word; table rows are kept unless empty")
    max_document_chars: int = Field(
        100_000, ge=100, description="longer paragraphs are cut at whitespace (one 100 MB line stays usable)")
    deduplicate: bool = Field(True, description="exact de-duplication of cleaned paragraphs")
    split_ratios: dict[str, float] = Field(
        default_factory=lambda: {"train": 0.9, "valid": 0.05, "test": 0.05},
        description="train / valid / test shares, by a hash of each document: stable when the corpus grows")
    split_salt: str = Field("", description="change to draw a different (still deterministic) split")
    line_by_line: Literal["auto"] | bool = Field(
        "auto", description="text files: true, each non-empty line is a paragraph (news, Wikipedia extracts); false, "
                            "blank lines end paragraphs and wrapped lines are joined; auto, each file decides from "
                            "its lines (logged)")

    @field_validator("sources", mode="before")
    @classmethod
    def _named(cls, sources: Any) -> Any:
        """A list of sources (``- {path: ..., weight: 0.7}``) as the mapping every stage reads:
        named ``source1``, ``source2``... as the catalog's corpus names them."""
        if isinstance(sources, list):
            return {f"source{number}": source for number, source in enumerate(sources, 1)}
        return sources

    @field_validator("split_ratios")
    @classmethod
    def _shares(cls, ratios: dict[str, float]) -> dict[str, float]:
        validate_split_ratios(ratios)
        return ratios

    @model_validator(mode="after")
    def _one_source(self) -> CorpusConfig:
        check_one_source(self.path, self.hf_dataset, self.sources)
        return self
