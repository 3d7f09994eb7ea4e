"""The model card: Hugging Face front matter the Hub parses, the run's facts, no secret."""

from __future__ import annotations

from huggingface_hub import ModelCard as HubCard

from bert_mlm.core.record import model_card as cards
from bert_mlm.core.record.results import ModelResults
from bert_mlm.core.record.run_record import DataRecord, RunRecord, run_facts, run_record

SECRET = "Sesame-Card-3"
MODEL = "2026-01-02T00.00.00.000Z"


def record(language: str, *, init_from: str | None = None,
           path: str = f"http://reader:{SECRET}@host/c.txt") -> RunRecord:
    sections = {"corpus": {"path": path, "hf_dataset": None, "sources": None}, "model": {"init_from": init_from,
                "hidden_size": 32}, "masking": {"probability": 0.15}, "training": {"batch_size": 8, "seed": 42}}
    facts = run_facts({"run_id": MODEL, "env": "smoke", "runtime_params": {"corpus": {"path": path}}},
                      sections, ["train_masked_lm"], "cpu")
    return run_record(facts, {"masking": {}, "training": {}},
                      DataRecord(source=path, language=language, documents={"train": 10, "valid": 1, "test": 1},
                                 token_store={"version": MODEL, "digests": {"train": "abc"}}))


def metrics(**extra) -> dict:
    return {"model_version": MODEL, "eval_accuracy": 0.31, "eval_accuracy_se": 0.01, "eval_loss": 4.2,
            "train_steps": 12, "parameter_count": 44840, "mask_probability": 0.15,
            "mask_probability_source": "tuning", **extra}


def model_card(values: dict, made: RunRecord | None) -> cards.ModelCard:
    """The card of ``values``: a metrics.json's keys."""
    return cards.model_card(ModelResults.from_json(values), made)


def test_the_card_is_hub_front_matter_then_the_run_and_holds_no_secret():
    card = model_card(metrics(), record("en"))
    assert card.model_version == MODEL and SECRET not in card.text
    hub = HubCard(card.text)  # huggingface_hub's own parser: what the Hub renders
    assert hub.data.language == "en" and hub.data.license == "unknown" and hub.data.pipeline_tag == "fill-mask"
    assert {"bert", "fill-mask", "masked-lm", "bert-mlm"} <= set(hub.data.tags) and hub.data.datasets is None
    assert "license: unknown  # placeholder" in card.text
    for part in ("## Training data", "http://reader:***@host/c.txt", "| steps | 12 |", "## Masking",
                 "15 % of the tokens masked (the mask-rate study's best)", "## Evaluation results",
                 "| masked-token accuracy (top-1) | 0.3100 ± 0.0100 |", "kedro run --env smoke --params corpus.path="):
        assert part in card.text, part


def test_a_chinese_corpus_gives_language_zh_and_a_continued_hub_model_its_base_model():
    card = model_card(metrics(eval_change_summary="the loss fell 0.5 ± 0.1 from the starting model"),
                      record("zh", init_from="bert-base-chinese", path="hf://datasets/owner/reviews/train.csv"))
    hub = HubCard(card.text)
    assert hub.data.language == "zh" and hub.data.base_model == "bert-base-chinese"
    assert hub.data.datasets == ["owner/reviews"] and "continued-pretraining" in hub.data.tags
    assert "continued from `bert-base-chinese`" in card.text
    assert "Before and after continued pretraining" in card.text and "fell 0.5" in card.text
    assert "北京是中国的[MASK]都" in card.text  # the usage example in the corpus's language


def test_unknown_language_is_said_and_a_model_without_record_still_gets_a_card():
    card = model_card({"model_version": MODEL}, None)
    assert "language: unknown" in card.text and "No run record" in card.text
    assert "Not evaluated yet" in card.text
    assert HubCard(card.text).data.language is None
