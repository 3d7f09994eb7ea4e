"""Mixture settings (``corpus.sources``): named sources with a weight (share of the training tokens)
or a repeat (passes), each with its own path or Hugging Face dataset and credentials; checked
whole (a source given twice is named as such when the source is checked: ``CorpusSource.check``)."""

from __future__ import annotations

from bert_mlm.core.corpus import CorpusError
from bert_mlm.core.sources.hf import HFDataset
from bert_mlm.core.sources.source import CorpusSource

SOURCE_KEYS = ("path", "text_column", "credentials", "fs_args", "hf_dataset", "weight", "repeat")


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


def mixture_source(sources, text_column: str = "text", parameter: str = "corpus.sources") -> CorpusSource:
    """``corpus.sources``: a mapping name -> source (``path`` or ``hf_dataset``, optional
    ``text_column``, ``credentials``, ``fs_args``, and ``weight`` (share of training tokens) or
    ``repeat`` (passes over that source)). Every source has a weight, or none has."""
    if isinstance(sources, list):
        sources = {f"source{i + 1}": value for i, value in enumerate(sources)}
    if not isinstance(sources, dict) or not sources:
        raise CorpusError(f"{parameter}: must be a non-empty mapping of name -> source")
    parts = []
    for name, spec in sources.items():
        where = f"{parameter}.{name}"
        if not isinstance(spec, dict):
            raise CorpusError(f"{where}: must be a mapping with path or hf_dataset")
        unknown = sorted(set(spec) - set(SOURCE_KEYS))
        if unknown:
            raise CorpusError(f"{where}: unknown key(s) {unknown}; use {list(SOURCE_KEYS)}")
        if ("path" in spec) == ("hf_dataset" in spec):
            raise CorpusError(f"{where}: give exactly one of path or hf_dataset")
        weight, repeat = spec.get("weight"), spec.get("repeat")
        for key, value in (("weight", weight), ("repeat", repeat)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise CorpusError(f"{where}.{key}: {value!r} must be a positive number")
        if weight is not None and repeat is not None:
            raise CorpusError(f"{where}: give weight or repeat, not both")
        hf_dataset = HFDataset.from_mapping(spec["hf_dataset"], f"{where}.hf_dataset") if "hf_dataset" in spec else None
        parts.append(CorpusSource(
            None if spec.get("path") is None else str(spec["path"]), spec.get("text_column", text_column),
            storage_options=storage_options_of(spec.get("credentials"), spec.get("fs_args"), where),
            builtin_when_empty=False, hf_dataset=hf_dataset, name=str(name), parameter=f"{where}.path",
            weight=None if weight is None else float(weight), repeat=None if repeat is None else float(repeat)))
    weighted = [p.weight is not None for p in parts]
    if any(weighted) and not all(weighted):
        raise CorpusError(f"{parameter}: give every source a weight, or none (each then read repeat times, default 1)")
    return CorpusSource(parts=tuple(parts), text_column=text_column, builtin_when_empty=False)
