"""``corpus``: where the texts are (read by the catalog's ``raw_corpus``, through the globals:
``settings.py``) and how they are cleaned, de-duplicated and split (read by the ingestion node)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from bert_mlm.config.base import Section
from bert_mlm.errors import UserError

SPLITS = ("train", "valid", "test")
REPLAY_SOURCE = "replay"  # corpus.replay's source in the mixture it makes
REPLAY_KEYS = ("path", "share", "text_column")


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


def named_sources(sources: Any) -> Any:
    """A list of sources (``- {path: ..., weight: 0.7}``) as the mapping every stage reads: named
    ``source1``, ``source2``... as the catalog's corpus names them; anything else as it is."""
    if isinstance(sources, list):
        return {f"source{number}": source for number, source in enumerate(sources, 1)}
    return sources


def check_one_source(path: Any, hf_dataset: Any, sources: Any) -> None:
    """At most one of ``corpus.path``, ``corpus.hf_dataset`` and ``corpus.sources`` is set."""
    given = [name for name, value in (("path", path), ("hf_dataset", hf_dataset), ("sources", sources))
             if value is not None]
    if len(given) > 1:
        raise UserError(f"corpus: give one of corpus.path, corpus.hf_dataset or corpus.sources, not "
                        f"{' and '.join('corpus.' + name for name in given)}")


def with_replay(path: Any, hf_dataset: Any, sources: Any, replay: Any, text_column: str = "text",
                domain_options: dict | None = None) -> Any:
    """``corpus.sources`` with ``corpus.replay``'s general text drawn beside the domain's (``corpus.path``
    or ``corpus.hf_dataset`` as the source ``domain``, or ``corpus.sources``) at ``share`` of each
    training epoch, as any mixture at sample time (a changed share re-encodes nothing). The general
    text is read for its train split only (``train_only``): its held-out side stays unseen."""
    if replay is None:
        return sources
    sources = named_sources(sources)
    if isinstance(sources, dict) and REPLAY_SOURCE in sources:
        if (sources[REPLAY_SOURCE] or {}).get("train_only"):
            return sources  # made from corpus.replay already (a validated section validated again)
        raise UserError(f"corpus.sources: {REPLAY_SOURCE!r} names corpus.replay's source; name yours otherwise")
    if sources is None:
        if path is None and hf_dataset is None:
            raise UserError("corpus.replay: replay mixes general text into a domain corpus; set corpus.path (or "
                            "corpus.hf_dataset, corpus.sources) to the domain's text too")
        domain = {"path": path} if path is not None else {"hf_dataset": hf_dataset}
        sources = {"domain": {**domain, **({"fs_args": domain_options} if domain_options else {}), "weight": 1.0}}
    if any(not isinstance(spec, dict) or spec.get("weight") is None for spec in sources.values()):
        raise UserError("corpus.replay: the domain's sources need weights (corpus.sources.<name>.weight), not "
                        "repeat: the replay share is a share of each epoch")
    general = {"path": replay["path"], "text_column": replay.get("text_column") or text_column,
               "weight": replay["share"], "train_only": True}
    return with_replay_share({**sources, REPLAY_SOURCE: general}, replay["share"])


def with_replay_share(sources: dict[str, Any], share: float) -> dict[str, Any]:
    """``corpus.sources`` made with ``corpus.replay`` (:func:`with_replay`), the replay source at
    ``share`` of each epoch and the domain's sources scaled to the rest: a tuning trial's
    ``replay_share``, drawn at sample time like any weight."""
    domain = {name: spec for name, spec in sources.items() if name != REPLAY_SOURCE}
    total = sum(float(spec["weight"]) for spec in domain.values())
    return {**{name: {**spec, "weight": float(spec["weight"]) / total * (1 - share)} for name, spec in domain.items()},
            REPLAY_SOURCE: {**sources[REPLAY_SOURCE], "weight": float(share)}}


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
    sources: Annotated[dict[str, Any] | list[Any] | None, BeforeValidator(named_sources)] = Field(
        None, description="a mixture: {name: {path or hf_dataset, weight or repeat, credentials, text_column}, ...}; "
                          "the weights apply per training epoch (changing one re-runs no data stage)")
    min_words: int = Field(
        4, ge=1, description="drop text-file paragraphs with fewer words (headings, page numbers); a CJK character is "
                             "a word; table rows are kept unless empty")
    max_document_chars: int = Field(
        100_000, ge=100, description="longer paragraphs are cut at whitespace (one 100 MB line stays usable)")
    deduplicate: bool = Field(True, description="exact de-duplication of cleaned paragraphs")
    replay: dict[str, Any] | None = Field(
        None, description="continued pretraining without forgetting: {path: <general text, any form of corpus.path>, "
                          "share: 0.1} mixes that share of general text into each training epoch (its train split)")
    split_ratios: dict[str, float] = Field(
        default_factory=lambda: {"train": 0.9, "valid": 0.05, "test": 0.05},
        description="train / valid / test shares, by a hash of each document: stable when the corpus grows")
    split_salt: str = Field("", description="change to draw a different (still deterministic) split")
    line_by_line: Literal["auto"] | bool = Field(
        "auto", description="text files: true, each non-empty line is a paragraph (news, Wikipedia extracts); false, "
                            "blank lines end paragraphs and wrapped lines are joined; auto, each file decides from "
                            "its lines (logged)")

    def held_out_of_replay(self, extra_path: str | None) -> tuple[dict, str] | None:
        """The split whose held-out side ``evaluation.corpus_path`` is scored on, when it is the
        replayed file (its train side is replayed; a model is never scored on text it trained on)."""
        if self.replay is None or not extra_path or str(extra_path) != str(self.replay["path"]):
            return None
        return dict(self.split_ratios), self.split_salt

    @field_validator("replay")
    @classmethod
    def _replay(cls, replay: dict[str, Any] | None) -> dict[str, Any] | None:
        if replay is None:
            return None
        unknown = sorted(set(replay) - set(REPLAY_KEYS))
        if unknown:
            raise UserError(f"corpus.replay: unknown key(s) {unknown}; use {list(REPLAY_KEYS)}")
        if not isinstance(replay.get("path"), str) or not replay["path"]:
            raise UserError("corpus.replay.path: the general text to replay (a file, folder, glob or URL)")
        share = replay.get("share")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
            raise UserError(f"corpus.replay.share: {share!r} must be a number in the open interval (0, 1)")
        return replay

    @model_validator(mode="before")
    @classmethod
    def _replay_as_mixture(cls, data: Any) -> Any:
        """corpus.replay becomes the mixture every stage reads (:func:`with_replay`)."""
        if isinstance(data, dict) and data.get("replay") is not None:
            cls._replay(data["replay"])
            check_one_source(data.get("path"), data.get("hf_dataset"), data.get("sources"))
            sources = with_replay(data.get("path"), data.get("hf_dataset"), data.get("sources"), data["replay"],
                                  data.get("text_column", "text"))
            data = {**data, "sources": sources, "path": None, "hf_dataset": None}
        return data

    @field_validator("split_ratios")
    @classmethod
    def _shares(cls, ratios: dict[str, float]) -> dict[str, float]:
        validate_split_ratios(ratios)
        return ratios

    @model_validator(mode="after")
    def _one_source(self) -> CorpusConfig:
        check_one_source(self.path, self.hf_dataset, self.sources)
        return self
