"""Mixture settings (``corpus.sources``): named sources, each with its own path or Hugging Face dataset
and credentials, and a weight (share of each training epoch) or a repeat (passes), which training
applies (:mod:`bert_mlm.core.tokens.blend`). A source given twice is refused by ``CorpusSource.check``."""

from __future__ import annotations

from collections.abc import Mapping

from bert_mlm.config.corpus import named_sources as config_named_sources
from bert_mlm.core.data.corpus import CorpusError
from bert_mlm.core.data.sources.hf import HFDataset
from bert_mlm.core.data.sources.source import CorpusSource

SOURCE_KEYS = ("path", "text_column", "credentials", "fs_args", "hf_dataset", "weight", "repeat", "train_only")


def storage_options_of(credentials, fs_args, parameter: str) -> dict | None:
    """Kedro's convention: a dataset's resolved ``credentials`` merged with its ``fs_args``."""
    if isinstance(credentials, str):
        raise CorpusError(f"{parameter}: credentials {credentials!r} were not resolved: Kedro resolves credentials "
                          "names in mappings only (give corpus.sources as a mapping of name -> source)")
    for value, key in ((credentials, "credentials"), (fs_args, "fs_args")):
        if value is not None and not isinstance(value, dict):
            raise CorpusError(f"{parameter}.{key}: must be a mapping, not {type(value).__name__}")
    options = {**(credentials or {}), **(fs_args or {})}
    return options or None


def named_sources(sources: Mapping | list) -> Mapping:
    """``corpus.sources`` as name -> source (:func:`bert_mlm.config.corpus.named_sources`), refused when empty."""
    sources = config_named_sources(sources)
    if not isinstance(sources, Mapping) or not sources:
        raise CorpusError("corpus.sources: must be a non-empty mapping of name -> source")
    return sources


def source_settings(sources: Mapping | list | None) -> dict[str, tuple[str, float]] | None:
    """``corpus.sources`` as name -> ("weight", w) or ("repeat", r) (``repeat`` 1 where neither is
    given); ``None`` when there is no mixture. Every source has a weight, or none has."""
    if sources is None:
        return None
    settings, weighted = {}, []
    for name, spec in named_sources(sources).items():
        spec = spec if isinstance(spec, Mapping) else {}
        weight, repeat = spec.get("weight"), spec.get("repeat")
        for key, value in (("weight", weight), ("repeat", repeat)):
            # A weight of 0 keeps a stored source out of training (a study's replay_share of 0).
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
                                      or (value == 0 and key == "repeat")):
                raise CorpusError(f"corpus.sources.{name}.{key}: {value!r} must be a "
                                  f"{'non-negative' if key == 'weight' else 'positive'} number")
        if weight is not None and repeat is not None:
            raise CorpusError(f"corpus.sources.{name}: give weight or repeat, not both")
        settings[str(name)] = ("weight", float(weight)) if weight is not None else ("repeat", float(repeat or 1.0))
        weighted.append(weight is not None)
    if any(weighted) and not all(weighted):
        raise CorpusError("corpus.sources: give every source a weight, or none (then each is read repeat times, "
                          "default 1)")
    if all(weighted) and not any(value for _, value in settings.values()):
        raise CorpusError("corpus.sources: every weight is 0; give at least one source a positive weight")
    return settings


def mixture_source(sources: Mapping | list, text_column: str = "text") -> CorpusSource:
    """``corpus.sources`` as one source: name -> ``path`` or ``hf_dataset``, and optionally
    ``text_column``, ``credentials``, ``fs_args`` and ``weight`` or ``repeat`` (:func:`source_settings`)."""
    source_settings(sources)
    parts = []
    for name, spec in named_sources(sources).items():
        where = f"corpus.sources.{name}"
        if not isinstance(spec, dict):
            raise CorpusError(f"{where}: must be a mapping with path or hf_dataset")
        unknown = sorted(set(spec) - set(SOURCE_KEYS))
        if unknown:
            raise CorpusError(f"{where}: unknown key(s) {unknown}; use {list(SOURCE_KEYS)}")
        if ("path" in spec) == ("hf_dataset" in spec):
            raise CorpusError(f"{where}: give exactly one of path or hf_dataset")
        hf_dataset = HFDataset.from_mapping(spec["hf_dataset"], f"{where}.hf_dataset") if "hf_dataset" in spec else None
        parts.append(CorpusSource(
            None if spec.get("path") is None else str(spec["path"]), spec.get("text_column", text_column),
            storage_options=storage_options_of(spec.get("credentials"), spec.get("fs_args"), where),
            builtin_when_empty=False, hf_dataset=hf_dataset, name=str(name), parameter=f"{where}.path",
            train_only=bool(spec.get("train_only"))))
    return CorpusSource(parts=tuple(parts), text_column=text_column, builtin_when_empty=False)
