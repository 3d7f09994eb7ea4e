"""One typed experiment config: every section built once, cross-section rules in one place, and
code defaults that are ``conf/base``'s own."""

from __future__ import annotations

import pytest
from kedro.config import OmegaConfigLoader

from bert_mlm.config import (
    SECTIONS,
    EvaluationConfig,
    EvaluationParameters,
    ExperimentConfig,
    TrainingConfig,
    whole_word_requested,
)
from bert_mlm.errors import UserError
from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

# conf/base turns checkpointing on for project runs (into the project's data folder); a library
# caller that builds a TrainingConfig() writes no checkpoint into its working directory.
PROJECT_ONLY = {("training", "checkpoint_every"), ("training", "checkpoint_dir")}


@pytest.fixture(scope="module")
def base_parameters(project_root) -> dict:
    loader = OmegaConfigLoader(str(project_root / "conf"), base_env="base", default_run_env="local",
                               merge_strategy={"parameters": "soft"})
    return dict(loader["parameters"])


def test_code_defaults_are_the_shipped_configuration(base_parameters):
    default = ExperimentConfig()
    shipped = ExperimentConfig.from_parameters(base_parameters, variants=VARIANTS)
    differences = [
        (name, field, getattr(getattr(default, name), field), getattr(getattr(shipped, name), field))
        for name in SECTIONS for field in SECTIONS[name].model_fields
        if (name, field) not in PROJECT_ONLY
        and getattr(getattr(default, name), field) != getattr(getattr(shipped, name), field)
    ]
    assert differences == [], "(section, field, code default, conf/base): make them equal"
    assert shipped.training.checkpoint_every > 0 and default.training.checkpoint_every == 0
    # Every parameter is listed in conf/base, in its section's file.
    assert {name: set(base_parameters[name]) for name in SECTIONS} == {
        name: set(section.model_fields) for name, section in SECTIONS.items()}


def test_sections_are_built_once_into_their_types():
    config = ExperimentConfig.from_parameters({"training": {"max_steps": 7},
                                               "evaluation": {"top_k": 3, "mask_draws": 2}})
    assert isinstance(config.training, TrainingConfig) and config.training.max_steps == 7
    assert isinstance(config.evaluation, EvaluationParameters) and config.evaluation.top_k == 3
    # The protocol is the evaluation section without what only the report uses.
    assert type(config.evaluation.protocol) is EvaluationConfig
    assert config.evaluation.protocol.model_dump() == {**EvaluationConfig().model_dump(), "mask_draws": 2}
    # What the nodes take: the built sections themselves (Kedro takes a built model as it is).
    parameters = config.parameters()
    assert parameters["training"] is config.training
    assert SECTIONS["training"].model_validate(parameters["training"]) is config.training


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"sequences": {"max_length": 256}, "model": {"max_position_embeddings": 128}},
         r"^sequences\.max_length: 256 exceeds model\.max_position_embeddings \(128\)$"),
        ({"trainig": {"max_steps": 3}}, r"^trainig: unknown parameter section; did you mean 'training'\?$"),
        ({"evaluation": {"top_k": 0}}, r"^evaluation\.top_k: 0 must be a positive integer$"),
        ({"evaluation": {"fill_mask_count": -1}}, r"^evaluation\.fill_mask_count: -1 must be an integer >= 0$"),
        ({"evaluation": {"top_kk": 5}},
         r"^evaluation: unknown parameter\(s\) evaluation\.top_kk; did you mean 'top_k'"),
        ({"training": {"epochs": 3}}, r"^training\.epochs: 3 and training\.max_steps: 360 both set the training "
                                      r"budget; set the other one to null \(--params training\.epochs=3,"
                                      r"training\.max_steps=null\)$"),
        ({"training": {"max_steps": None}}, r"^training\.max_steps: null needs training\.epochs"),
        ({"mask_030": {"overrides": {"masking": {"probability": 1.5}}}},
         r"^mask_030\.overrides: masking\.probability: 1\.5 must be in the open interval \(0, 1\)$"),
        ({"mask_030": {"override": {}}}, r"^mask_030: unknown parameter\(s\) mask_030\.override"),
    ],
)
def test_a_bad_value_is_refused_by_name(parameters, message):
    with pytest.raises(UserError, match=message):
        ExperimentConfig.from_parameters(parameters, variants=VARIANTS)


def test_epochs_alone_set_the_budget():
    training = ExperimentConfig.from_parameters({"training": {"epochs": 2.5, "max_steps": None}}).training
    assert (training.epochs, training.max_steps) == (2.5, None)


def test_whole_word_is_requested_by_training_evaluation_or_the_study():
    masking, evaluation, tuning = (SECTIONS[name].build({}) for name in ("masking", "evaluation", "tuning"))
    assert not whole_word_requested(masking, evaluation, tuning)
    assert whole_word_requested(masking.replace(whole_word=True), evaluation, tuning)
    assert whole_word_requested(masking, evaluation.replace(whole_word=True), tuning)
    searched = SECTIONS["tuning"].build({"search_space": {"probability": [0.1, 0.4], "whole_word": [False, True]}})
    assert whole_word_requested(masking, evaluation, searched)
    assert not whole_word_requested(masking, evaluation, searched.replace(n_trials=0))


def test_tuning_by_fine_tuning_needs_a_task_and_old_probe_settings_say_where_they_went():
    with pytest.raises(UserError, match=r"tuning\.objective: finetune needs a labelled task: set finetune\.train_path"):
        ExperimentConfig.from_parameters({"tuning": {"objective": "finetune"}})
    ExperimentConfig.from_parameters({"tuning": {"objective": "finetune", "n_trials": 0}})  # no study, no task needed
    with pytest.raises(UserError, match=r"tuning\.objective: 'accuracy' is not one of"):
        ExperimentConfig.from_parameters({"tuning": {"objective": "accuracy"}})
    with pytest.raises(UserError, match=r"probe: the downstream probe became the fine-tuning evaluation.*finetune:"):
        ExperimentConfig.from_parameters({"probe": {"train_path": "x.csv"}})


def test_a_study_of_continued_pretraining_needs_a_model_general_text_and_replay_to_search():
    continued = {"model": {"init_from": "bert-base-chinese"}, "evaluation": {"corpus_path": "news.txt"},
                 "tuning": {"objective": "continued"}}
    ExperimentConfig.from_parameters(continued)
    with pytest.raises(UserError, match=r"^tuning\.objective: continued .* needs model\.init_from"):
        ExperimentConfig.from_parameters({**continued, "model": {}})
    with pytest.raises(UserError, match=r"^tuning\.objective: continued measures forgetting on general text: set "
                                        r"evaluation\.corpus_path"):
        ExperimentConfig.from_parameters({**continued, "evaluation": {}})
    searched = {"search_space": {"replay_share": [-0.1, 0.5]}}
    with pytest.raises(UserError, match=r"^tuning\.search_space\.replay_share: \[-0\.1, 0\.5\] must be \[low, high\] "
                                        r"with 0 <= low < high$"):
        ExperimentConfig.from_parameters({**continued, "tuning": {"objective": "continued", **searched}})
    searched = {"search_space": {"replay_share": [0, 0.5]}}  # 0: no replay
    with pytest.raises(UserError, match=r"^tuning\.search_space\.replay_share: set corpus\.replay"):
        ExperimentConfig.from_parameters({**continued, "tuning": {"objective": "continued", **searched}})
    with pytest.raises(UserError, match=r"^tuning\.search_space\.replay_share: .* with tuning\.objective: continued"):
        ExperimentConfig.from_parameters({"tuning": searched})
    with pytest.raises(UserError, match=r"^tuning\.forgetting_budget: -0\.1 must be"):
        ExperimentConfig.from_parameters({"tuning": {"forgetting_budget": -0.1}})
