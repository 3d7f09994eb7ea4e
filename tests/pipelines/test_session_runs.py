"""Real Kedro sessions on small data: the data stages, then the whole chain in the smoke env."""

from __future__ import annotations

import html
import io
import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from huggingface_hub import ModelCard as HubCard
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from kedro.io.core import Version
from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline

from bert_mlm.config.training import CONTINUED_LR_FACTOR
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.train.experiment import open_sequences
from bert_mlm.datasets.data import SequenceIndexDataset
from tests.kedro_runs import finetune_params, latest, run_session, write_labelled_task

METRIC_KEYS = {
    "eval_loss", "eval_perplexity", "eval_accuracy", "eval_top5_accuracy", "eval_masked_tokens",
    "baseline_accuracy", "train_tokens", "train_tokens_per_second", "mask_probability",
}


FINETUNE_KEYS = {
    "finetune_accuracy", "finetune_accuracy_se", "finetune_macro_f1", "finetune_baseline_accuracy", "finetune_gain",
    "finetune_gain_ci_low", "finetune_gain_ci_high", "finetune_seeds",
}


@pytest.fixture
def labelled_task(tmp_path) -> Path:
    """A small labelled file: whether a sentence says it failed (English words of the built-in corpus)."""
    return write_labelled_task(tmp_path / "task.csv")


@pytest.fixture
def small_corpus(shared_data, tmp_path) -> Path:
    return shared_data / "corpora" / "gutenberg" / "austen-persuasion.txt"


def test_data_pipelines_on_a_real_book(project_copy, monkeypatch, small_corpus, tmp_path):
    timings = tmp_path / "timings.json"
    monkeypatch.setenv("BERT_MLM_NODE_TIMINGS", str(timings))
    for name in ("ingestion", "tokenization", "sequences"):
        run_session(project_copy, monkeypatch, pipeline_name=name, **{"corpus.path": str(small_corpus)})
    data = project_copy / "data"
    # The last run's node timings (NodeTimingHook): the node itself, then with its catalog I/O.
    (timed,) = json.loads(timings.read_text())["nodes"]
    assert timed["node"] == "build_model_inputs" and 0 < timed["seconds"] <= timed["seconds_with_io"]
    shards = DocumentShards(latest(data / "02_intermediate" / "corpus_documents"))
    documents = shards.frame()
    assert set(documents["split"]) == {"train", "valid", "test"}
    assert documents["source"].eq(str(small_corpus)).all()
    stats = pd.read_csv(latest(data / "08_reporting" / "corpus_stats.csv")).set_index("split")
    assert stats.loc["all", "documents"] == len(documents)

    tokenizer = AutoTokenizer.from_pretrained(latest(data / "06_models" / "tokenizer"))
    assert tokenizer.pad_token_id == 0 and tokenizer.mask_token == "[MASK]"
    tokenization = pd.read_csv(latest(data / "08_reporting" / "tokenization_stats.csv")).set_index("split")
    assert tokenization.loc["test", "unknown_rate"] < 0.01
    assert tokenization.loc["all", "store_bytes_per_token"] < 2.2  # uint16 (+ one separator per document)

    store = TokenStore(latest(data / "04_feature" / "token_store"))
    assert store.dtype == np.uint16
    for split in ("train", "valid", "test"):
        texts = documents.loc[documents["split"] == split, "text"].tolist()
        assert len(store.split(split)) == len(texts)
        assert store.split(split).document(0).tolist() == tokenizer(texts[0], add_special_tokens=False)["input_ids"]
    index = SequenceIndexDataset(str(data / "05_model_input" / "sequence_index"), version=Version(None, None)).load()
    sequences = open_sequences(store, index, tokenizer)
    # Packing keeps every token: per split, document tokens + one [SEP] each + one [CLS] per block.
    for split, split_sequences in sequences.items():
        assert split_sequences.lengths.sum() == store.split(split).num_tokens + len(split_sequences)
        assert all(s[0] == tokenizer.cls_token_id for s in split_sequences[:50])
    assert max(s.lengths.max() for s in sequences.values()) <= 64  # smoke env's sequences.max_length


@pytest.mark.slow
def test_training_alone_on_two_data_parallel_workers_reuses_the_stored_data(smoke_chain_copy, monkeypatch,
                                                                            labelled_task):
    """Runs that change only training parameters run `--pipelines training,evaluation` on the
    stored versions (a copy of the shared chain's): no data stage runs again, and a changed sequence
    shape is refused. The training node runs on two data-parallel workers (`distributed.nproc_per_node=2`;
    tests/core/model/test_distributed.py checks that they train as one process would) with the tuning
    stage's masking. `--pipelines finetune` judges the latest trained model against its starting point."""
    project, data = smoke_chain_copy, smoke_chain_copy / "data"
    stored = {
        p: sorted(p.iterdir())
        for p in (data / "04_feature" / "token_store", data / "05_model_input" / "sequence_index")
    }
    run_session(project, monkeypatch, pipeline_name="training", main_thread=True,
                **{"training.max_steps": 3, "distributed.nproc_per_node": 2})
    summary = json.loads(latest(data / "07_model_output" / "training_summary.json").read_text())
    assert summary["data_parallel_workers"] == 2 and summary["mask_probability_source"] == "tuning"
    (_, model) = sorted((data / "06_models" / "masked_lm").iterdir())  # the shared chain's, and this run's
    run_session(project, monkeypatch, pipeline_name="finetune", **finetune_params(labelled_task))
    finetune = json.loads(latest(data / "08_reporting" / "finetune_metrics.json").read_text())
    assert FINETUNE_KEYS <= set(finetune) and finetune["finetune_seeds"] == [0, 1]
    assert finetune["finetune_baseline"].startswith("the random initialisation")
    runs = pd.read_csv(latest(data / "08_reporting" / "finetune_runs.csv"))
    assert len(runs) == 2 * 2 * (1 + 2) and set(runs["model"]) == {"pretrained", "baseline"}  # epoch 0: the probe head
    mapping = json.loads(latest(data / "06_models" / "finetune_label_mapping.json").read_text())
    assert mapping["label_to_id"] == {"failed": 0, "passed": 1}
    run_session(project, monkeypatch, pipeline_name="evaluation")
    assert {p: sorted(p.iterdir()) for p in stored} == stored  # no new data versions
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text())
    assert metrics["train_steps"] == 3 and metrics["eval_masked_tokens"] > 0 and metrics["model_version"] == model.name
    assert metrics["finetune_gain"] == pytest.approx(finetune["finetune_gain"])
    assert "finetune_example_accuracy" not in metrics and "finetune_example_accuracy" in finetune
    with pytest.raises(Exception, match=r"sequences: the stored sequence_index is packed x 64.*x 32"):
        run_session(project, monkeypatch, pipeline_name="training", **{"sequences.max_length": 32})
    # The training stage trains with the masking the tuning stage saved: a masking value changed
    # without that stage would be ignored in silence, so it is refused, before any work.
    models = sorted((data / "06_models" / "masked_lm").iterdir())
    with pytest.raises(ValueError, match=r"^masking\.whole_word: this run's parameters say True, but the training "
                                         r"stage takes its masking from resolved_masking"):
        run_session(project, monkeypatch, pipeline_name="training", **{"masking.whole_word": True})
    assert sorted((data / "06_models" / "masked_lm").iterdir()) == models


@pytest.mark.slow
def test_whole_chain_in_the_smoke_env(smoke_chain):
    """The default chain with a labelled task (the suite's shared chain, tests/kedro_runs.py): the
    study tunes the mask rate by fine-tuning (tuning.objective=finetune), and the trained model is
    fine-tuned against its starting point."""
    data = smoke_chain / "data"
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text())
    assert METRIC_KEYS <= set(metrics) and FINETUNE_KEYS <= set(metrics)
    assert metrics["eval_masked_tokens"] > 0 and metrics["train_tokens"] > 0
    assert metrics["mask_probability_source"] == "tuning"
    best = json.loads(latest(data / "07_model_output" / "tuning_best_params.json").read_text())
    assert metrics["mask_probability"] == pytest.approx(best["masking"]["probability"])
    # The masking the model trained with is a dataset of its own, the tuning stage's output.
    masking = json.loads(latest(data / "07_model_output" / "resolved_masking.json").read_text())
    assert masking["probability"] == metrics["mask_probability"] and masking["mask_token_fraction"] == 0.8
    trials = pd.read_csv(latest(data / "07_model_output" / "tuning_trials.csv"))
    assert (trials["state"].isin(["COMPLETE", "PRUNED"])).sum() == 2
    # Each trial's score is its model's fine-tuning error; the accuracies are stored with it.
    assert best["objective"] == "finetune" and 0 <= best["best_finetune_score"] <= 1
    accuracies = trials["attr_finetune_score"].map(lambda v: json.loads(v) if isinstance(v, str) else v)
    assert all(
        value == pytest.approx(1 - sum(a) / len(a)) for value, a in zip(trials["value"], accuracies, strict=True)
    )

    model_dir = latest(data / "06_models" / "masked_lm")
    assert (model_dir / "model.safetensors").is_file()
    fill = pipeline("fill-mask", model=str(model_dir))
    predictions = fill("Return the [MASK] of the list.")
    assert len(predictions) == 5 and all("token_str" in p for p in predictions)
    assert AutoModelForMaskedLM.from_pretrained(model_dir).config.pad_token_id == 0
    report = latest(data / "08_reporting" / "run_report.html").read_text()
    for section in ("Corpus", "Sequences and padding efficiency", "Training", "Tuning of the mask probability",
                    "Fine-tuning on the downstream task", "Evaluation (fixed protocol)", "Fill-mask examples"):
        assert f"<h2>{section}</h2>" in report
    # The summary shows the value with its standard error (every digit stays in metrics.json).
    assert report.count("data:image/png;base64,") == 3 and f"{metrics['eval_accuracy']:.4f} ± " in report
    assert "accuracy points [95 % CI" in report and "fine-tuning curves" in report
    # Validated during training every 5 steps (and at the last), drawn beside the training loss.
    history = pd.read_csv(latest(data / "07_model_output" / "training_history.csv"))
    assert list(history.dropna(subset=["valid_loss"])["step"]) == [5, 10, 12]
    assert metrics["eval_every"] == 5 and metrics["kept_step"] == 12 and not metrics["keep_best"]
    assert "Validated every 5 steps" in report


@pytest.mark.slow
def test_mask_rates_side_by_side_then_one_namespace_alone(smoke_chain_copy, monkeypatch, labelled_task):
    """In a copy of the shared chain's project: the comparison's data stages are reused."""
    from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

    run_session(smoke_chain_copy, monkeypatch, pipeline_name="mask_rate_comparison",
                **finetune_params(labelled_task, **{"finetune.epochs": 1, "finetune.baseline": "none"}))
    data = smoke_chain_copy / "data"
    comparison = pd.read_csv(latest(data / "08_reporting" / "mask_rate_comparison.csv"))
    assert sorted(comparison["variant"]) == sorted(VARIANTS)
    # Fine-tuned accuracy per variant, paired against the lowest mask rate (same seeds and examples).
    assert comparison["finetune_accuracy"].notna().all()
    assert comparison["finetune_difference"].isna().tolist() == [True, False, False]
    assert list(comparison["mask_probability"]) == [0.15, 0.30, 0.45]
    assert comparison["eval_loss"].nunique() == len(VARIANTS)  # really different models
    for variant in VARIANTS:
        summary = json.loads(latest(data / "07_model_output" / variant / "training_summary.json").read_text())
        assert summary["mask_probability_source"] == "variant"
        assert list((data / "06_models" / "checkpoints" / variant).glob("run-*/step-*")), (
            "each variant checkpoints apart"
        )
    report = latest(data / "08_reporting" / "mask_rate_comparison.html").read_text()
    assert "Lowest fixed-protocol eval loss" in report and report.count("data:image/png;base64,") == 1

    # `kedro run --pipeline mask_rate_comparison --namespaces mask_030`: that variant only, on the
    # data the first run stored.
    monkeypatch.chdir(smoke_chain_copy)
    with KedroSession.create(project_path=smoke_chain_copy, env="smoke") as session:
        session.run(pipeline_names=["mask_rate_comparison"], namespaces=["mask_030"])
    versions = {v: len(list((data / "08_reporting" / v / "metrics.json").iterdir())) for v in VARIANTS}
    assert versions == {v: 2 if v == "mask_030" else 1 for v in VARIANTS}
    assert len(list((data / "08_reporting" / "mask_rate_comparison.csv").iterdir())) == 1


def test_bad_parameter_fails_before_any_work(project_copy, monkeypatch, tmp_path):
    with pytest.raises(ValueError, match=r"masking\.probability: 1\.5"):
        run_session(project_copy, monkeypatch, **{"masking.probability": 1.5})
    # A labelled task with one class: refused before the data stages, not after training.
    one_class = tmp_path / "one_class.csv"
    pd.DataFrame({"text": [f"review {i}" for i in range(50)], "label": ["好评"] * 50}).to_csv(one_class, index=False)
    with pytest.raises(ValueError, match=r"finetune\.label_column: .* has one class only \('好评'\)"):
        run_session(project_copy, monkeypatch, **{"finetune.train_path": str(one_class)})
    assert not any((project_copy / "data").rglob("*.parquet")), "nothing may be written"


@pytest.mark.slow
def test_continued_pretraining_of_a_checkpoint_takes_its_tokenizer(
    project_copy, monkeypatch, shared_data, tiny_chinese_bert, tmp_path, reviews
):
    """`--params model.init_from=<checkpoint>`: no vocabulary is trained; the checkpoint's own
    tokenizer encodes the corpus (Chinese reviews here), extended by the characters it lacks
    (tokenizer.extend_vocabulary), and the trained model grows with it; it validates during
    training and keeps the best step. With Chinese news as `evaluation.corpus_path`, the report
    says how the loss moved on both, the starting model (grown the same way) scored on the same masks."""
    news = tmp_path / "新闻.txt"
    lines = (shared_data / "corpora" / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()
    news.write_text("\n\n".join(lines[:1500]), encoding="utf-8")  # a blank line between sentences: one each
    run_session(project_copy, monkeypatch, **{"corpus.path": str(reviews), "corpus.text_column": "review",
                                              "model.init_from": str(tiny_chinese_bert), "tuning.n_trials": 0,
                                              "tokenizer.extend_vocabulary": 400, "training.eval_every": 4,
                                              "training.keep_best": True, "evaluation.corpus_path": str(news)})
    data = project_copy / "data"
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text())
    assert metrics["eval_change_summary"].startswith(
        "continued pretraining lowered the held-out loss on the test split of ChnSentiCorp_htl_all.csv from ")
    assert " the held-out loss on 新闻.txt from " in metrics["extra_eval_change_summary"]
    report = latest(data / "08_reporting" / "run_report.html").read_text()
    assert html.escape(metrics["extra_eval_change_summary"][1:]) in report
    assert_before_equals_a_separate_evaluation(project_copy, metrics, tiny_chinese_bert, news, "smoke")
    tokenizer = AutoTokenizer.from_pretrained(latest(data / "06_models" / "tokenizer"))
    own = AutoTokenizer.from_pretrained(tiny_chinese_bert).get_vocab()
    assert len(own) < len(tokenizer) <= len(own) + 400
    assert {token: index for token, index in tokenizer.get_vocab().items() if index < len(own)} == own
    coverage = json.loads(latest(data / "08_reporting" / "vocabulary_coverage.json").read_text())
    assert coverage["unknown_rate"] > 0.001 > coverage["unknown_rate_after"]  # bert-base-chinese lacks 0.17 %
    stats = pd.read_csv(latest(data / "08_reporting" / "tokenization_stats.csv")).set_index("split")
    assert stats.loc["all", "unknown_rate"] < 0.001
    model_dir = latest(data / "06_models" / "masked_lm")
    model = AutoModelForMaskedLM.from_pretrained(model_dir)
    assert model.config.vocab_size == len(tokenizer) and model.config.hidden_size == 32
    # The card says where the model came from and the corpus's language (the reviews are Chinese).
    card = HubCard((latest(data / "06_models" / "masked_lm") / "README.md").read_text(encoding="utf-8"))
    assert card.data.language == "zh" and "continued-pretraining" in card.data.tags
    # A local folder: named, never its path on this machine (the card is uploaded with the model).
    assert f"continued from `{tiny_chinese_bert.name}`" in card.text and card.data.base_model is None
    assert str(tiny_chinese_bert.parent) not in card.text
    new = coverage["added"][0]
    saved = AutoTokenizer.from_pretrained(model_dir)
    assert saved(f"房间{new}")["input_ids"][1:-1] == saved.convert_tokens_to_ids(["房", "间", new])
    assert len(pipeline("fill-mask", model=str(model_dir))(f"房间{new}[MASK]好")) == 5
    # Validation every 4 steps of the 12, the best step kept and named.
    history = pd.read_csv(latest(data / "07_model_output" / "training_history.csv"))
    assert list(history.dropna(subset=["valid_loss"])["step"]) == [4, 8, 12]
    summary = json.loads(latest(data / "07_model_output" / "training_summary.json").read_text())
    assert summary["keep_best"] and summary["kept_step"] == summary["best_valid_step"]
    assert 0 < summary["valid_share"] < 1
    report = latest(data / "08_reporting" / "run_report.html").read_text()
    assert "Validated every 4 steps" in report and "tokenizer.extend_vocabulary added" in report
    # Tracking is off by default: a whole chain wrote no TensorBoard event files and nothing to MLflow.
    assert not (data / "09_tracking").exists()


def assert_before_equals_a_separate_evaluation(project: Path, metrics: dict, start: Path, extra: Path,
                                              env: str) -> None:
    """The starting model's numbers in ``metrics`` are its own evaluation, made apart, on the
    stored held-out data and ``extra``: the same masked tokens, the same values. The start is the
    checkpoint loaded for the run's tokenizer (grown when tokenizer.extend_vocabulary added tokens)."""
    from bert_mlm.core.data.sources import read_corpus
    from bert_mlm.core.model.bert import load_for_continued_pretraining
    from bert_mlm.core.tokens.tokenizer import load_tokenizer
    from bert_mlm.core.train.experiment import held_out_metrics

    with KedroSession.create(project_path=project, env=env) as session:
        catalog = session.load_context().catalog
        evaluation, sequences = catalog.load("params:evaluation"), catalog.load("params:sequences")
    data = project / "data"
    index = SequenceIndexDataset(str(data / "05_model_input" / "sequence_index"), version=Version(None, None)).load()
    tokenizer = load_tokenizer(latest(data / "06_models" / "tokenizer"))
    separate = held_out_metrics(load_for_continued_pretraining(start, tokenizer), tokenizer,
                                TokenStore(latest(data / "04_feature" / "token_store")), index, evaluation.protocol,
                                sequences, read_corpus(extra)).to_json()
    for key in ("eval_loss", "eval_accuracy", "eval_top5_accuracy", "extra_eval_loss", "extra_eval_accuracy"):
        assert metrics[f"{key}_start"] == pytest.approx(separate[key], rel=1e-9), key
        assert metrics[f"{key}_change"] == pytest.approx(metrics[key] - separate[key], abs=1e-7), key
    assert metrics["eval_masked_tokens"] == separate["eval_masked_tokens"]
    assert 0 < metrics["eval_loss_change_se"] < math.hypot(metrics["eval_loss_se"], separate["eval_loss_se"])


@pytest.mark.slow
def test_continued_pretraining_says_how_the_loss_moved_on_the_domain_and_on_general_text(
    project_copy, monkeypatch, shared_data, smoke_chain
):
    """A general model trained by the chain (the shared smoke chain's), continued (`model.init_from`)
    on another text with `evaluation.corpus_path` pointing at a general book: the log, metrics.json
    and the report say in one sentence each how the held-out loss moved, and the starting model's
    numbers are its own evaluation on the same masks."""
    general_text = shared_data / "corpora" / "gutenberg" / "austen-persuasion.txt"
    domain_text = shared_data / "corpora" / "wikitext-2-raw" / "wiki.valid.raw"
    data = project_copy / "data"
    general = latest(smoke_chain / "data" / "06_models" / "masked_lm")
    # The run summary's logger (bert_mlm.hooks, where the sentences are logged once): the project's
    # logging configuration (applied at every session) leaves a logger it does not name alone, and
    # with it this handler.
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    summary_logger = logging.getLogger("bert_mlm.hooks")
    summary_logger.addHandler(handler)
    try:
        run_session(project_copy, monkeypatch, **{"corpus.path": str(domain_text), "model.init_from": str(general),
                                                  "evaluation.corpus_path": str(general_text), "tuning.n_trials": 0})
    finally:
        summary_logger.removeHandler(handler)
    log = log.getvalue()
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text())
    rate = CONTINUED_LR_FACTOR * 2e-3 * 128 / 32  # the smoke model is 32 wide
    assert metrics["learning_rate"] == pytest.approx(rate)
    assert f"learning rate {rate:.3g} (auto for continued pretraining" in metrics["learning_rate_schedule"]
    held_out, extra = metrics["eval_change_summary"], metrics["extra_eval_change_summary"]
    assert re.fullmatch(r"continued pretraining (lowered|raised) the held-out loss on the test split of "
                        r"wiki\.valid\.raw from \d+\.\d+ to \d+\.\d+ \([+-]\d+\.\d+ ± \d+\.\d+; accuracy .*",
                        held_out)
    assert extra.startswith("continued pretraining ") and " the held-out loss on austen-persuasion.txt from " in extra
    before, after = map(float, re.search(r" from (\S+) to (\S+) ", held_out).groups())
    assert before == pytest.approx(metrics["eval_loss_start"], abs=5e-3)
    assert after == pytest.approx(metrics["eval_loss"], abs=5e-3)
    for sentence in (held_out, extra):
        assert sentence in log
    report = latest(data / "08_reporting" / "run_report.html").read_text()
    assert html.escape(held_out[0].upper() + held_out[1:]) in report and html.escape(extra[1:]) in report
    assert_before_equals_a_separate_evaluation(project_copy, metrics, general, general_text, "smoke")


@pytest.mark.slow
def test_chinese_chain_with_whole_word_masking_on_jieba_words(project_copy, monkeypatch, reviews):
    """The zh env on Chinese reviews (2,000 of them, both labels): whole-word masking on jieba words, a study
    that searches whole_word, and fill-mask examples from the test split in Chinese with the true character."""
    (project_copy / "conf" / "smoke_zh").mkdir()
    for name in ("catalog.yml", "parameters.yml"):
        source = project_copy / "conf" / "smoke" / name
        if source.exists():
            (project_copy / "conf" / "smoke_zh" / name).write_text(source.read_text())
    zh = (project_copy / "conf" / "zh" / "parameters.yml").read_text()
    smoke = (project_copy / "conf" / "smoke_zh" / "parameters.yml").read_text()
    (project_copy / "conf" / "smoke_zh" / "parameters.yml").write_text(
        smoke.replace("tokenizer:\n  vocab_size: 1000\n", "")
        + "\n"
        + zh.replace("vocab_size: 21128", "vocab_size: 3000")
    )
    run_session(project_copy, monkeypatch, env="smoke_zh", **{
        "corpus.path": str(reviews), "corpus.text_column": "review",
        "tuning.search_space.whole_word": "[false,true]",
        **finetune_params(reviews, **{"finetune.text_column": "review", "finetune.seeds": 1, "finetune.epochs": 1}),
    })
    data = project_copy / "data"
    index = SequenceIndexDataset(
        filepath=str(data / "05_model_input" / "sequence_index"), version=Version(None, None)
    ).load()
    assert index.word_segmenter == "rjieba" and set(index.words) == {"train", "valid", "test"}
    assert index.word_scheme == 2  # rjieba's own scheme: never read as jieba's bits
    metrics = json.loads(latest(data / "08_reporting" / "metrics.json").read_text())
    assert metrics["whole_word"] is True and metrics["word_segmenter"] == "rjieba"
    trials = pd.read_csv(latest(data / "07_model_output" / "tuning_trials.csv"))
    assert "params_whole_word" in trials
    examples = metrics["fill_mask_examples"]
    assert len(examples) == 3
    assert all("[MASK]" in e["sentence"] and "\u4e00" <= e["answer"] <= "\u9fff" for e in examples)
    report = latest(data / "08_reporting" / "run_report.html").read_text()
    assert "true word" in report
    # The whole-word-masked Chinese model, fine-tuned on the reviews' sentiment against its start.
    finetune = json.loads(latest(data / "08_reporting" / "finetune_metrics.json").read_text())
    assert FINETUNE_KEYS <= set(finetune) and finetune["finetune_classes"] == 2
    assert HubCard((latest(data / "06_models" / "masked_lm") / "README.md").read_text(encoding="utf-8")).data.language \
        == "zh"
    # The word bits were stored by the encoding pass: asking the sequences stage alone for another
    # segmenter's words is one line that says which stage makes them.
    with pytest.raises(ValueError, match=r"^masking\.whole_word: whole-word masking on jieba words needs the token "
                                         r"store to hold them, and .* holds rjieba words .* run the tokenization"):
        run_session(project_copy, monkeypatch, env="smoke_zh", pipeline_name="sequences", **{
            "corpus.path": str(reviews), "corpus.text_column": "review", "masking.word_segmenter": "jieba"})


def test_nodes_receive_typed_sections_with_runtime_overrides(project_copy, monkeypatch):
    """Kedro builds each section a node declares (``training: TrainingConfig``) from the merged
    parameters, --params included; it takes the section the project's hook built, so each
    section is validated once."""
    from bert_mlm.config import EvaluationParameters, TrainingConfig

    validator = TrainingConfig.__pydantic_validator__
    built = []

    class Counting:  # counts the validations of values that are not a built TrainingConfig yet
        def validate_python(self, value, *args, **kwargs):
            built.extend([] if isinstance(value, TrainingConfig) else [value])
            return validator.validate_python(value, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(validator, name)

    monkeypatch.setattr(TrainingConfig, "__pydantic_validator__", Counting())
    monkeypatch.chdir(project_copy)
    bootstrap_project(project_copy)
    with KedroSession.create(project_path=project_copy, env="smoke",
                             runtime_params={"training": {"max_steps": 5}, "evaluation": {"top_k": 2}}) as session:
        catalog = session.load_context().catalog
        training, evaluation = catalog.load("params:training"), catalog.load("params:evaluation")
    # Once for the section; the mask-rate variants' sections (their own checkpoint_dir) are checked beside it.
    main = [values for values in built if "mask_0" not in str(values.get("checkpoint_dir"))]
    assert len(main) == 1 and main[0]["max_steps"] == 5
    assert isinstance(training, TrainingConfig) and training.max_steps == 5
    assert isinstance(evaluation, EvaluationParameters) and evaluation.top_k == 2
    assert evaluation.protocol.mask_draws == evaluation.mask_draws


def test_a_crash_during_fine_tuning_keeps_the_trained_model(smoke_chain_copy, monkeypatch, labelled_task):
    """Fine-tuning fails half-way (the second run raises) in a run that trains first: the trained model is
    already saved, no fine-tuning output has a half-written version, and `--pipelines finetune` then completes.
    `--pipelines training,finetune` in a copy of the shared chain's project: the data stages are not the subject."""
    from bert_mlm.core.finetune.runs import Runner

    real_run, calls = Runner.run, []

    def failing_second_run(self, *args, **kwargs):
        calls.append(args[1])
        if len(calls) == 2:
            raise RuntimeError("injected fault in the second fine-tuning run")
        return real_run(self, *args, **kwargs)

    data = smoke_chain_copy / "data"
    outputs = [data / "08_reporting" / "finetune_metrics.json", data / "08_reporting" / "finetune_runs.csv"]
    versions = {path: sorted(path.iterdir()) for path in [*outputs, data / "06_models" / "masked_lm"]}
    monkeypatch.setattr(Runner, "run", failing_second_run)
    with pytest.raises(Exception, match="injected fault"):
        run_session(smoke_chain_copy, monkeypatch, pipeline_name=["training", "finetune"],
                    **finetune_params(labelled_task))
    models = sorted((data / "06_models" / "masked_lm").iterdir())
    assert len(models) == len(versions[data / "06_models" / "masked_lm"]) + 1  # this run's model, saved
    assert (models[-1] / "masked_lm" / "model.safetensors").is_file()
    assert {path: sorted(path.iterdir()) for path in outputs} == {path: versions[path] for path in outputs}
    monkeypatch.setattr(Runner, "run", real_run)
    run_session(smoke_chain_copy, monkeypatch, pipeline_name="finetune", **finetune_params(labelled_task))
    assert len(list(outputs[0].iterdir())) == len(versions[outputs[0]]) + 1
    finetune = json.loads(latest(outputs[0]).read_text())
    assert "finetune_gain" in finetune and finetune["finetune_model_version"] == models[-1].name
