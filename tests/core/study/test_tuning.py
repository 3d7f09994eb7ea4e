"""The Optuna study: resumable, multi-worker, fair (identical evaluation masks), skippable.

Studies whose subject is not their storage keep it in a journal file (``journal:``, a storage the project
supports): an SQLite database costs ~0.5 s to create its schema. SQLite is the storage of the tests that are
about it: a rerun continuing its study, a node's reruns, two workers sharing one study."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest
import torch

from bert_mlm.config import SECTIONS, MaskingConfig, TuningConfig
from bert_mlm.core.data.sources import CorpusSource
from bert_mlm.core.study.tuning import (
    adoption,
    best_parameters,
    masking_for,
    open_study,
    paired_interval,
    run_study,
    trials_table,
)
from bert_mlm.core.train import experiment as experiment_module
from bert_mlm.pipelines.tuning.nodes import tune_mask_probability

WORKER = Path(__file__).with_name("tuning_worker.py")


def quadratic(trial, values, report):
    report(1, values["probability"])
    return (values["probability"] - 0.3) ** 2


def finished_numbers(storage: str, name: str = "workers") -> list[int]:
    study = optuna.load_study(study_name=name, storage=storage)
    return sorted(
        t.number for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
    )


def test_rerun_continues_the_study_without_redoing_trials(tmp_path):
    storage = f"sqlite:///{tmp_path}/study.db"
    config = TuningConfig(n_trials=3, storage=storage, study_name="s", pruner="none")
    study = run_study(config, quadratic)
    first = [(t.number, t.params["probability"]) for t in study.trials]
    assert len(first) == 3

    calls = []

    def counting(trial, values, report):
        calls.append(trial.number)
        return quadratic(trial, values, report)

    run_study(config, counting)
    assert calls == []  # n_trials is the study's total: nothing left to do
    bigger = TuningConfig(n_trials=5, storage=storage, study_name="s", pruner="none")
    study = run_study(bigger, counting)
    assert calls == [3, 4]
    assert [(t.number, t.params["probability"]) for t in study.trials][:3] == first
    best = best_parameters(study, bigger)
    assert best.source == "tuning" and 0.1 <= best.masking["probability"] <= 0.5
    assert best.finished_trials == 5


def test_same_seed_same_study(tmp_path):
    values = []
    for run in range(2):
        config = TuningConfig(n_trials=4, storage=f"journal:{tmp_path}/{run}.log", seed=7)
        values.append([t.params["probability"] for t in run_study(config, quadratic).trials])
    assert values[0] == values[1]
    assert len(set(values[0])) == 4


def test_a_crashing_trial_is_recorded_and_the_study_goes_on(tmp_path):
    config = TuningConfig(n_trials=3, storage=f"journal:{tmp_path}/s.log", pruner="none")

    def flaky(trial, values, report):
        if trial.number == 1:
            raise RuntimeError("out of memory, say")
        return quadratic(trial, values, report)

    study = run_study(config, flaky)
    table = trials_table(study)
    assert list(table["state"]) == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]


def test_every_trial_failing_stops_with_an_error(tmp_path):
    config = TuningConfig(n_trials=2, storage=f"journal:{tmp_path}/s.log")

    def broken(trial, values, report):
        raise ValueError("bad config")

    with pytest.raises(RuntimeError, match="consecutive trials failed"):
        run_study(config, broken)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_two_workers_share_one_study_and_finish_exactly_n_trials(tmp_path, kind):
    storage = f"sqlite:///{tmp_path}/study.db" if kind == "sqlite" else f"journal:{tmp_path}/study.log"
    if kind == "sqlite":
        open_study(TuningConfig(storage=storage, study_name="workers"))  # create once, no race on the schema
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), storage, "6", "0.3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=180) for w in workers]
    assert all(w.returncode == 0 for w in workers), outputs
    if kind == "journal":
        from bert_mlm.core.study.tuning import make_storage

        storage_object = make_storage(TuningConfig(storage=storage))
        study = optuna.load_study(study_name="workers", storage=storage_object)
        numbers = sorted(t.number for t in study.trials if t.state.is_finished() and t.state.name != "FAIL")
    else:
        numbers = finished_numbers(storage)
    assert len(numbers) == 6 and len(set(numbers)) == 6


# ----------------------------------------------------------------------------- the node
def tiny_inputs(directory: Path):
    """A real token store and sequence index (one document per sequence) of 200 short texts."""
    from bert_mlm.config import SequenceConfig, TokenizerConfig
    from bert_mlm.core.tokens.sequences import build_sequence_index
    from bert_mlm.core.tokens.token_store import write_token_store
    from bert_mlm.core.tokens.tokenizer import train_wordpiece

    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "omega", "theta", "kappa", "sigma"]
    texts = [" ".join(rng.choice(words, size=20)) for _ in range(200)]
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=60, min_frequency=1, base_alphabet="none"))
    store = write_token_store(directory / "store", {"train": texts[:150], "valid": texts[150:]}, tokenizer)
    index = build_sequence_index(store, SequenceConfig(mode="document", max_length=32), ("train", "valid", "test"))
    return store, index, tokenizer


PARAMS = {
    "model": {
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "max_position_embeddings": 32,
    },
    "training": {"batch_size": 8, "progress": False, "warmup_steps": 1},
    "masking": {"probability": 0.15},
    "evaluation": {"batch_size": 16, "mask_draws": 1},
    "sequences": {"max_length": 32, "mode": "document"},
}


def tune(store, index, tokenizer, tuning: dict, **sections):
    """The tuning node on the typed sections (one seed per trial unless ``tuning`` says more)."""
    values = {**PARAMS, **sections}
    typed = (SECTIONS[name].build(values[name]) for name in ("model", "training", "masking", "evaluation", "sequences"))
    return tune_mask_probability(store, index, tokenizer, SECTIONS["tuning"].build({"seeds": 1, **tuning}), *typed,
                                 SECTIONS["finetune"].build(values.get("finetune")), SECTIONS["corpus"].build({}),
                                 CorpusSource(builtin_when_empty=False))


def test_trials_with_different_rates_are_scored_on_identical_masks(tmp_path, monkeypatch):
    seen = []
    real_scores = experiment_module.score_sequences

    def recording_scores(model, evaluation_set, *args, **kwargs):
        whole = evaluation_set.materialise()
        seen.append((whole.input_ids.clone(), whole.labels.clone()))
        return real_scores(model, evaluation_set, *args, **kwargs)

    monkeypatch.setattr(experiment_module, "score_sequences", recording_scores)
    store, index, tokenizer = tiny_inputs(tmp_path)
    tuning = {
        "n_trials": 2,
        "trial_steps": 4,
        "eval_every": 2,
        "storage": f"journal:{tmp_path}/s.log",
        "pruner": "none",
    }
    masking, training, best, trials, objective_plot, history_plot = tune(store, index, tokenizer, tuning)
    probabilities = trials["params_probability"].tolist()
    assert len(probabilities) == 2 and probabilities[0] != probabilities[1]
    # Two evaluations per trial, then the confirmation (adopt: if_better) trains the configured
    # setting (the best trial's own losses stand for the tuned one): all on the same masks.
    assert len(seen) == 6
    for inputs, labels in seen[1:]:
        assert torch.equal(inputs, seen[0][0]) and torch.equal(labels, seen[0][1])
    masked_rate = (seen[0][1] != -100).sum() / (seen[0][1] != -100).numel()
    assert 0 < masked_rate < 0.15  # 15 % of real tokens; padding and specials never masked
    assert best.masking["probability"] in [*probabilities, PARAMS["masking"]["probability"]]
    # The section training takes: the study's best when it was adopted, else the configured one.
    assert masking.probability == best.masking["probability"] and training == {}
    assert masking.replace(probability=0.15) == SECTIONS["masking"].build(PARAMS["masking"])
    # The finished trials' points; pruned ones get a panel of their own, and pruner: none prunes none.
    assert len(objective_plot.axes) == 1 and len(objective_plot.axes[0].collections) == 1


def test_zero_trials_bypasses_tuning(tmp_path):
    store, index, tokenizer = tiny_inputs(tmp_path)
    tuning = {"n_trials": 0, "storage": f"sqlite:///{tmp_path}/never.db"}
    masking, training, best, trials, _, _ = tune(store, index, tokenizer, tuning,
                                                 masking={"probability": 0.2, "whole_word": False})
    assert best.to_json() == {"masking": {"probability": 0.2}, "source": "parameters"}
    assert masking == SECTIONS["masking"].build({"probability": 0.2}) and training == {}
    assert trials.empty
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"n_trials": -1}, "tuning.n_trials"),
        ({"search_space": {"probability": [0.5, 0.2]}}, "tuning.search_space.probability"),
        ({"search_space": {"probability": [0.1, 1.2]}}, "tuning.search_space.probability"),
        ({"search_space": {"dropout": [0.1, 0.2]}}, "tuning.search_space"),
        ({"pruner": "magic"}, "tuning.pruner"),
        ({"search_space": {"whole_word": [0.1, 0.2]}},
         r"tuning.search_space.whole_word: .* choices, e.g. \[false, true\]"),
    ],
)
def test_bad_tuning_config_names_the_parameter(overrides, message):
    with pytest.raises(ValueError, match=message):
        TuningConfig(**overrides)


def test_node_reruns_continue_and_a_changed_setup_starts_a_new_study(tmp_path):
    store, index, tokenizer = tiny_inputs(tmp_path)
    tuning = {
        "n_trials": 2,
        "trial_steps": 2,
        "eval_every": 1,
        "storage": f"sqlite:///{tmp_path}/s.db",
        "pruner": "none",
    }
    _, _, first, trials_first, _, _ = tune(store, index, tokenizer, tuning)
    _, _, again, trials_again, _, _ = tune(store, index, tokenizer, tuning)
    assert again.study_name == first.study_name and first.study_name.startswith("mask-probability-")
    assert trials_again["number"].tolist() == trials_first["number"].tolist() == [0, 1]
    _, _, changed, trials_changed, _, _ = tune(store, index, tokenizer, {**tuning, "trial_steps": 3})
    assert changed.study_name != first.study_name
    assert trials_changed["number"].tolist() == [0, 1]
    assert len(optuna.get_all_study_names(f"sqlite:///{tmp_path}/s.db")) == 2


def test_speed_settings_keep_the_study_and_a_training_setting_changes_it():
    from types import SimpleNamespace

    from bert_mlm.config import EvaluationConfig, ModelConfig, SequenceConfig, TrainingConfig
    from bert_mlm.core.study.mask_study import study_fingerprint

    def fingerprint(model=None, **training) -> str:
        experiment = SimpleNamespace(model_config=model or ModelConfig(), training=TrainingConfig(**training),
                                     masking=MaskingConfig(), evaluation=EvaluationConfig(),
                                     sequence_config=SequenceConfig(), sequences={})
        return study_fingerprint(experiment, TuningConfig())

    # How often the host reads the loss, and compiling, are speed: a rerun continues the same study.
    assert fingerprint(record_every=1) == fingerprint(record_every=10) == fingerprint(compile=True)
    assert fingerprint(learning_rate=1e-3) != fingerprint(learning_rate=2e-3)
    # Another initialisation is another study; BERT's at 0.02 keeps the name studies had before both settings.
    bert = ModelConfig(initialisation="bert")
    assert fingerprint(bert.replace(initializer_range=0.05)) != fingerprint(bert) != fingerprint()
    assert fingerprint(bert) == "63662a55e6"  # as computed by the version before model.initializer_range


def test_the_study_can_search_whole_word_masking(tmp_path):
    config = TuningConfig(n_trials=4, search_space={"probability": [0.1, 0.4], "whole_word": [False, True]},
                          storage=f"journal:{tmp_path}/ww.log", sampler="random", pruner="none")
    seen = []

    def run_trial(trial, values, report):
        seen.append(values)
        return values["probability"] + (0.0 if values["whole_word"] else 1.0)

    study = run_study(config, run_trial)
    assert {v["whole_word"] for v in seen} == {False, True} and all(isinstance(v["whole_word"], bool) for v in seen)
    best = best_parameters(study, config)
    assert best.masking["whole_word"] is True
    assert masking_for(best.masking, MaskingConfig()).whole_word is True


def test_if_better_keeps_the_configured_setting_unless_the_interval_clears_zero():
    within_noise = paired_interval([0.01, -0.02, 0.015])  # configured - tuned, per seed
    assert within_noise["low"] < 0 < within_noise["high"]
    adopted, reason = adoption(within_noise, "if_better")
    assert not adopted and "within seed noise" in reason
    assert adoption(within_noise, "always")[0]
    clear = paired_interval([0.05, 0.051, 0.049])
    assert clear["low"] > 0 and adoption(clear, "if_better")[0]
    worse = paired_interval([-0.05, -0.051, -0.049])
    assert not adoption(worse, "if_better")[0]
    single = paired_interval([0.5])
    assert single["low"] == float("-inf") and "tuning.seeds >= 2" in adoption(single, "if_better")[1]
    # The interval is Student's t: three pairs, mean 0.05, sd 0.001 -> half-width t(0.975, 2) * 0.001 / sqrt(3).
    assert clear["high"] - clear["mean"] == pytest.approx(4.302653 * 0.001 / 3**0.5, rel=1e-4)


def test_seeds_per_trial_and_a_paired_confirmation(tmp_path):
    store, index, tokenizer = tiny_inputs(tmp_path)
    tuning = {
        "n_trials": 2,
        "trial_steps": 2,
        "eval_every": 1,
        "storage": f"journal:{tmp_path}/c.log",
        "pruner": "none",
        "seeds": 2,
        "adopt": "if_better",
    }
    masking, _, best, trials, _, _ = tune(store, index, tokenizer, tuning)
    seed_losses = [json.loads(v) if isinstance(v, str) else v for v in trials["attr_seed_losses"]]
    assert all(len(losses) == 2 for losses in seed_losses)
    # The spread is the seeds' sample standard deviation, and two seeds do differ.
    assert trials["attr_seed_spread"].tolist() == pytest.approx([float(np.std(v, ddof=1)) for v in seed_losses])
    assert (trials["attr_seed_spread"] > 0).all()
    confirmation = best.confirmation
    assert len(confirmation.tuned_losses) == len(confirmation.configured_losses) == 2
    assert confirmation.ci_low <= confirmation.difference <= confirmation.ci_high
    assert confirmation.adopted == (confirmation.ci_low > 0)
    if not confirmation.adopted:
        assert best.source == "parameters"
        assert best.masking["probability"] == PARAMS["masking"]["probability"] == masking.probability
    # The tuned setting's first-seed loss in the confirmation is that trial's own first seed:
    # the same model, data order and evaluation masks.
    best_trial = trials.set_index("number").loc[best.best_trial]
    seeds = best_trial["attr_seed_losses"]
    assert confirmation.tuned_losses == pytest.approx(json.loads(seeds) if isinstance(seeds, str) else seeds)


def test_a_study_by_fine_tuning_scores_trials_by_their_fine_tuned_accuracy(tmp_path):
    """tuning.objective=finetune: each trial's value is 1 - its models' mean fine-tuned accuracy,
    stored with the accuracies; no intermediate eval loss is reported (nothing to prune by), and
    the paired confirmation compares fine-tuning errors."""
    import pandas as pd

    store, index, tokenizer = tiny_inputs(tmp_path)
    rng = np.random.default_rng(1)
    words = ["alpha", "beta", "gamma", "delta", "omega", "theta"]
    rows = [
        {"text": " ".join(rng.choice(words, size=6)) + (" kappa kappa" if i % 2 else " sigma sigma"), "label": i % 2}
        for i in range(120)
    ]
    task = tmp_path / "task.csv"
    pd.DataFrame(rows).to_csv(task, index=False)
    finetune = {"train_path": str(task), "seeds": 2, "epochs": 2, "max_length": 32, "progress": False}
    tuning = {"n_trials": 2, "trial_steps": 4, "eval_every": 2, "storage": f"journal:{tmp_path}/f.log",
              "objective": "finetune", "seeds": 2}
    _, _, best, trials, objective_plot, _ = tune(store, index, tokenizer, tuning, finetune=finetune)
    assert best.objective == "finetune" and "best_finetune_score" in best.score
    assert "fine-tuning error" in best.confirmation.reason
    for value, accuracies in zip(trials["value"], trials["attr_finetune_score"], strict=True):
        assert len(accuracies) == 2 and value == pytest.approx(1 - sum(accuracies) / 2)
    assert trials["last_step"].isna().all(), "no intermediate values: nothing to prune by"
    assert "fine-tuning error" in objective_plot.axes[0].get_ylabel()


def test_a_study_judged_by_one_of_several_tasks_scores_its_entity_f1(tmp_path):
    """tuning.finetune_task: ner: the trials' error is 1 - the NER task's entity F1 (a tagger on CoNLL lines); mean:
    the mean of every task's error."""
    import pandas as pd

    from bert_mlm.config import ModelConfig
    from bert_mlm.core.model.bert import build_model
    from bert_mlm.core.study.mask_study import finetune_scorer
    from bert_mlm.core.train.experiment import Experiment

    store, index, tokenizer = tiny_inputs(tmp_path)
    rng = np.random.default_rng(2)
    words = ["alpha", "beta", "gamma", "delta", "omega", "theta"]
    sentences = [list(rng.choice(words, size=6)) + ["kappa", "sigma"] * (i % 2) for i in range(120)]
    noise = rng.integers(0, 2, size=len(sentences))  # sentiment labels without signal: its error is not NER's
    pd.DataFrame({"text": [" ".join(s) for s in sentences], "label": noise}).to_csv(
        tmp_path / "sentiment.csv", index=False)
    # kappa sigma: an ORG of two words; the others are outside any entity.
    tags = {"kappa": "B-ORG", "sigma": "I-ORG"}
    (tmp_path / "ner.conll").write_text("\n\n".join("\n".join(f"{w} {tags.get(w, 'O')}" for w in s) for s in sentences))
    finetune = {"seeds": 1, "epochs": 1, "max_length": 32, "progress": False, "learning_rate": 3e-3,
                "tasks": {"sentiment": {"train_path": str(tmp_path / "sentiment.csv")},
                          "ner": {"train_path": str(tmp_path / "ner.conll")}}}
    tuning = {"n_trials": 1, "trial_steps": 2, "eval_every": 2, "storage": f"journal:{tmp_path}/t.log",
              "objective": "finetune", "finetune_task": "ner", "adopt": "always"}
    _, _, best, trials, _, _ = tune(store, index, tokenizer, tuning, finetune=finetune)
    (scores,) = trials["attr_finetune_score"]
    assert best.best_value == pytest.approx(1 - scores[0]) and 0 < scores[0] <= 1
    sections = {name: SECTIONS[name].build(PARAMS[name]) for name in PARAMS}
    experiment = Experiment.from_store(store, index, tokenizer, model=sections["model"], training=sections["training"],
                                       masking=sections["masking"], evaluation=sections["evaluation"].protocol,
                                       sequences=sections["sequences"])
    config = SECTIONS["finetune"].build(finetune)
    (ner, fingerprints), (sentiment, _), (mean, _) = (finetune_scorer(experiment, config, chosen)
                                                      for chosen in ("ner", "sentiment", "mean"))
    assert list(fingerprints) == ["ner"]
    model = build_model(ModelConfig(**PARAMS["model"]), tokenizer, seed=0)
    assert mean(model) == pytest.approx((ner(model) + sentiment(model)) / 2)
    assert ner(model) < 0.2 < sentiment(model)


def test_a_user_error_in_a_trial_stops_the_study_in_its_own_line(tmp_path):
    """A setting the user must change (here: a step that cannot fit) failed every trial and ended as "tuning: 2
    consecutive trials failed; see the log", after 218-238 lines."""
    from bert_mlm.errors import UserError

    config = TuningConfig(n_trials=3, storage=f"journal:{tmp_path}/s.log")
    calls = []

    def refused(trial, values, report):
        calls.append(trial.number)
        raise UserError("sequences.max_length: one training step ... needs about 40 GB")

    with pytest.raises(UserError, match=r"^sequences\.max_length: one training step"):
        run_study(config, refused)
    assert calls == [0]
