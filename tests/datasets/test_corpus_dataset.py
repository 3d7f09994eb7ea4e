"""The raw-corpus dataset: user files, the built-in corpus, and the optional extra corpus."""

from __future__ import annotations

import pytest
from kedro.io import DatasetError

from bert_mlm.core.data.corpus import CorpusError
from bert_mlm.datasets.corpus import CorpusDataset


def test_reads_a_directory_of_mixed_files(tmp_path):
    (tmp_path / "a.txt").write_text("First paragraph\nwrapped.\n\nSecond one.\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"body": "row one"}\n{"body": "row two"}\n', encoding="utf-8")
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    source = CorpusDataset(path=str(tmp_path), text_column="body").load()
    assert [f.name for f in source.files()] == ["a.txt", "b.jsonl"]
    items = [item for batch in source.batches() for item in batch]
    assert [item.is_document for item in items] == [False, True, True]
    assert [item.text for item in items][1:] == ["row one", "row two"]


def test_empty_path_is_the_builtin_corpus_or_nothing():
    builtin = [item for batch in CorpusDataset(path=None, builtin_max_files=3).load().batches() for item in batch]
    assert builtin and all(item.source.startswith("builtin:") for item in builtin)
    nothing = CorpusDataset(path="", builtin_when_empty=False).load()
    assert nothing.is_empty and not list(nothing.batches())


def test_missing_path_names_the_parameter(tmp_path):
    with pytest.raises((CorpusError, DatasetError), match="corpus.path"):
        CorpusDataset(path=str(tmp_path / "nope")).load()


def test_is_read_only():
    with pytest.raises(DatasetError, match="read-only"):
        CorpusDataset(path=None).save("some text")
