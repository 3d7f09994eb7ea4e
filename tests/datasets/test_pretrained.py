"""Versioned Hugging Face directories: round trip, atomic saves, latest-version loading."""

from __future__ import annotations

import pytest
from kedro.io.core import Version
from transformers import BertConfig, BertForMaskedLM

from bert_mlm.config import TokenizerConfig
from bert_mlm.core.tokens.tokenizer import train_wordpiece
from bert_mlm.datasets.pretrained import MaskedLM, MaskedLMDataset, TokenizerDataset


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["the cat sat on the mat", "a dog ran in the park", "the mat was red"] * 20
    return train_wordpiece(texts, TokenizerConfig(vocab_size=60, min_frequency=1, base_alphabet="none"))


def tiny_model(tokenizer) -> BertForMaskedLM:
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, pad_token_id=0)
    return BertForMaskedLM(config)


def test_tokenizer_round_trip_and_versions(tmp_path, tokenizer):
    first = TokenizerDataset(str(tmp_path / "tok"), version=Version(None, "2026-01-01T00.00.00.000Z"))
    first.save(tokenizer)
    second = TokenizerDataset(str(tmp_path / "tok"), version=Version(None, "2026-01-02T00.00.00.000Z"))
    second.save(tokenizer)
    latest = TokenizerDataset(str(tmp_path / "tok"), version=Version(None, None))
    assert latest.exists()
    assert str(latest._get_load_path()).endswith("2026-01-02T00.00.00.000Z/tok")
    loaded = latest.load()
    assert loaded("the cat sat")["input_ids"] == tokenizer("the cat sat")["input_ids"]


def test_model_directory_loads_in_fill_mask(tmp_path, tokenizer):
    from transformers import pipeline

    dataset = MaskedLMDataset(str(tmp_path / "lm"), version=Version(None, None))
    dataset.save(MaskedLM(tiny_model(tokenizer), tokenizer))
    saved = next((tmp_path / "lm").iterdir()) / "lm"
    assert (saved / "model.safetensors").is_file() and (saved / "tokenizer.json").is_file()
    bundle = MaskedLMDataset(str(tmp_path / "lm"), version=Version(None, None)).load()
    assert bundle.model.config.vocab_size == len(tokenizer)
    assert len(pipeline("fill-mask", model=str(saved))("the [MASK] sat")) == 5


def test_failed_save_leaves_no_version(tmp_path, tokenizer):
    class Exploding:
        def save_pretrained(self, directory):
            (tmp_path / "half-written-marker").touch()
            raise OSError("disk full")

    dataset = MaskedLMDataset(str(tmp_path / "lm"), version=Version(None, None))
    with pytest.raises(Exception, match="disk full"):
        dataset.save(MaskedLM(Exploding(), tokenizer))
    versions = list((tmp_path / "lm").iterdir()) if (tmp_path / "lm").exists() else []
    assert all(not list(v.iterdir()) for v in versions), "no directory may remain, not even a temporary one"
    assert not MaskedLMDataset(str(tmp_path / "lm"), version=Version(None, None)).exists()


def test_a_classifier_is_saved_only_when_kept(tmp_path, tokenizer):
    from transformers import BertForSequenceClassification, BertForTokenClassification

    from bert_mlm.datasets.pretrained import Classifier, ClassifierDataset

    config = tiny_model(tokenizer).config
    config.num_labels, config.id2label, config.label2id = 2, {0: "差评", 1: "好评"}, {"差评": 0, "好评": 1}
    kept = ClassifierDataset(str(tmp_path / "clf"), version=Version(None, "2026-01-01T00.00.00.000Z"))
    kept.save(Classifier({"": BertForSequenceClassification(config)}, tokenizer))
    loaded = ClassifierDataset(str(tmp_path / "clf"), version=Version(None, None)).load()
    assert loaded.model.config.id2label == {0: "差评", 1: "好评"} and loaded.tokenizer is not None
    # Without fine-tuning nothing is written; without finetune.save_model a version says why it holds no weights,
    # so the newest version is the newest fine-tuning's.
    ClassifierDataset(str(tmp_path / "clf"), version=Version(None, "2026-01-02T00.00.00.000Z")).save(Classifier())
    assert [p.name for p in (tmp_path / "clf").iterdir()] == ["2026-01-01T00.00.00.000Z"]
    ClassifierDataset(str(tmp_path / "clf"), version=Version(None, "2026-01-03T00.00.00.000Z")).save(
        Classifier({}, tokenizer))
    latest = ClassifierDataset(str(tmp_path / "clf"), version=Version(None, None))
    assert latest.load().model is None
    assert not list((tmp_path / "clf").glob("2026-01-03*/clf/*.safetensors"))
    # Several tasks: a folder each, every one a plain transformers directory of its own kind.
    tags = config.__class__.from_dict({**config.to_dict(), "id2label": {0: "O", 1: "B-PER", 2: "I-PER"},
                                       "label2id": {"O": 0, "B-PER": 1, "I-PER": 2}})
    ClassifierDataset(str(tmp_path / "clf"), version=Version(None, "2026-01-04T00.00.00.000Z")).save(
        Classifier({"sentiment": BertForSequenceClassification(config), "ner": BertForTokenClassification(tags)},
                   tokenizer))
    both = ClassifierDataset(str(tmp_path / "clf"), version=Version(None, None)).load().models
    assert {name: type(model).__name__ for name, model in both.items()} == {
        "ner": "BertForTokenClassification", "sentiment": "BertForSequenceClassification"}
    assert both["ner"].config.id2label[1] == "B-PER"


def test_the_model_card_goes_into_the_models_folder_which_plain_transformers_still_loads(tmp_path, tokenizer):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from bert_mlm.core.record.model_card import ModelCard
    from bert_mlm.datasets.pretrained import ModelCardDataset

    version = "2026-01-01T00.00.00.000Z"
    MaskedLMDataset(str(tmp_path / "masked_lm"), version=Version(None, version)).save(
        MaskedLM(tiny_model(tokenizer), tokenizer))
    loaded = MaskedLMDataset(str(tmp_path / "masked_lm"), version=Version(None, None)).load()
    assert loaded.version == version  # the results made with it name it
    cards = ModelCardDataset(str(tmp_path / "masked_lm"))
    cards.save(ModelCard(None, "no model yet, or one made in memory: no folder"))
    folder = tmp_path / "masked_lm" / version / "masked_lm"
    assert not (folder / "README.md").exists()
    cards.save(ModelCard(version, "---\nlanguage: en\n---\n# first\n"))
    cards.save(ModelCard(version, "---\nlanguage: en\n---\n# refreshed\n"))  # a later run's card replaces it
    assert (folder / "README.md").read_text() == cards.load() == "---\nlanguage: en\n---\n# refreshed\n"
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []  # no temporary left
    model = AutoModelForMaskedLM.from_pretrained(folder)
    assert model.config.hidden_size == 16 and AutoTokenizer.from_pretrained(folder).mask_token == "[MASK]"
    cards.save(ModelCard("2030-01-01T00.00.00.000Z", "a deleted model"))  # no folder: nothing written
    assert not (tmp_path / "masked_lm" / "2030-01-01T00.00.00.000Z").exists()
