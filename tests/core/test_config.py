"""One typed experiment config: every section built once, cross-section rules in one place, and
code defaults that are ``conf/base``'s own."""

from __future__ import annotations

import dataclasses

import pytest
from kedro.config import OmegaConfigLoader

from bert_mlm.core.config import SECTIONS, ExperimentConfig, build_section, whole_word_requested
from bert_mlm.core.errors import UserError
from bert_mlm.core.evaluation import EvaluationConfig, EvaluationParameters
from bert_mlm.core.training_config import TrainingConfig

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
    shipped = ExperimentConfig.from_parameters(base_parameters, other_sections=set(base_parameters) - set(SECTIONS))
    differences = [
        (name, field.name, getattr(getattr(default, name), field.name), getattr(getattr(shipped, name), field.name))
        for name in SECTIONS for field in dataclasses.fields(SECTIONS[name])
        if (name, field.name) not in PROJECT_ONLY
        and getattr(getattr(default, name), field.name) != getattr(getattr(shipped, name), field.name)
    ]
    assert differences == [], "(section, field, code default, conf/base): make them equal"
    assert shipped.training.checkpoint_every > 0 and default.training.checkpoint_every == 0


def test_sections_are_built_once_into_their_types(base_parameters):
    config = ExperimentConfig.from_parameters(
        {"training": {"max_steps": 7}, "evaluation": {"top_k": 3, "mask_draws": 2}}
    )
    assert isinstance(config.training, TrainingConfig) and config.training.max_steps == 7
    assert isinstance(config.evaluation, EvaluationParameters) and config.evaluation.top_k == 3
    # The protocol is the evaluation section without what only the report uses.
    assert type(config.evaluation.protocol) is EvaluationConfig
    assert dataclasses.asdict(config.evaluation.protocol) == {**dataclasses.asdict(EvaluationConfig()), "mask_draws": 2}


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"sequences": {"max_length": 256}, "model": {"max_position_embeddings": 128}},
         r"sequences\.max_length: 256 exceeds model\.max_position_embeddings \(128\)"),
        ({"trainig": {"max_steps": 3}}, r"trainig: unknown parameter section; did you mean 'training'\?"),
        ({"evaluation": {"top_k": 0}}, r"evaluation\.top_k: 0 must be a positive integer"),
        ({"evaluation": {"fill_mask_count": -1}}, r"evaluation\.fill_mask_count: -1 must be an integer >= 0"),
        ({"evaluation": {"top_kk": 5}}, r"evaluation: unknown parameter\(s\) evaluation\.top_kk"),
    ],
)
def test_a_bad_value_is_refused_by_name(parameters, message):
    with pytest.raises(UserError, match=message):
        ExperimentConfig.from_parameters(parameters)


def test_whole_word_is_requested_by_training_evaluation_or_the_study():
    masking, evaluation, tuning = (
        build_section("masking", {}),
        build_section("evaluation", {}),
        build_section("tuning", {}),
    )
    assert not whole_word_requested(masking, evaluation, tuning)
    assert whole_word_requested(dataclasses.replace(masking, whole_word=True), evaluation, tuning)
    assert whole_word_requested(masking, dataclasses.replace(evaluation, whole_word=True), tuning)
    searched = build_section("tuning", {"search_space": {"probability": [0.1, 0.4], "whole_word": [False, True]}})
    assert whole_word_requested(masking, evaluation, searched)
    assert not whole_word_requested(masking, evaluation, dataclasses.replace(searched, n_trials=0))


def test_tuning_by_fine_tuning_needs_a_task_and_old_probe_settings_say_where_they_went():
    with pytest.raises(UserError, match=r"tuning\.objective: finetune needs a labelled task: set finetune\.train_path"):
        ExperimentConfig.from_parameters({"tuning": {"objective": "finetune"}})
    ExperimentConfig.from_parameters({"tuning": {"objective": "finetune", "n_trials": 0}})  # no study, no task needed
    with pytest.raises(UserError, match=r"tuning\.objective: 'accuracy' is not one of"):
        ExperimentConfig.from_parameters({"tuning": {"objective": "accuracy"}})
    with pytest.raises(UserError, match=r"probe: the downstream probe became the fine-tuning evaluation.*finetune:"):
        ExperimentConfig.from_parameters({"probe": {"train_path": "x.csv"}})
