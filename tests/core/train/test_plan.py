"""The run's plan: a training step measured here, and the budgets and estimate built on it."""

from __future__ import annotations

import pytest
import torch

from bert_mlm.config import ExperimentConfig
from bert_mlm.core.train import plan as plan_module
from bert_mlm.core.train.loop import accumulate_gradients
from bert_mlm.core.train.plan import StepTiming, measure_step, plan_run

CHAIN = ["ingestion", "tokenization", "sequences", "tuning", "training", "finetune", "evaluation", "reporting"]
TIMING = StepTiming(step_seconds=0.1, forward_tokens_per_second=40_000.0, seconds=0.5)
TINY = {"model": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 64},
        "sequences": {"max_length": 32}, "tokenizer": {"vocab_size": 500}}


def config(**sections) -> ExperimentConfig:
    return ExperimentConfig.from_parameters(sections)


def seconds(plan, name: str) -> float | None:
    return next(stage.seconds for stage in plan.stages if stage.name == name)


def test_a_training_step_is_timed_without_touching_the_random_state():
    torch.manual_seed(7)
    before = torch.get_rng_state()
    timing = measure_step(config(**TINY, training={"batch_size": 8}), torch.device("cpu"), budget_seconds=0.2,
                          max_steps=3)
    assert torch.equal(torch.get_rng_state(), before)  # the run's seeds draw what they would have drawn
    assert 0 < timing.step_seconds < timing.seconds and timing.forward_tokens_per_second > 0


def test_the_default_plan_names_every_stage_and_budget():
    plan = plan_run(CHAIN, config(), TIMING)
    lines = plan.lines()
    assert lines[0] == "Plan: " + " -> ".join(CHAIN)
    text = "\n".join(lines)
    assert "tuning: 3 trials x 2 seed(s) x 30 steps, then a paired confirmation (2 run(s) of 30 steps)" in text
    assert "training: 360 steps of 32 x 128 tokens" in text
    assert "finetune: off (finetune.train_path is not set)" in text
    assert "evaluation: the fixed protocol's 20,000 masked tokens" in text
    assert lines[-1].startswith("Plan: steps and forward passes ~")
    assert "a training step measured at 0.100 s" in lines[-1]
    # Only the stages of steps and forward passes are estimated: the data stages and reporting are timed as they run.
    assert [stage.name for stage in plan.stages if stage.seconds] == ["tuning", "training", "evaluation"]


def test_the_estimate_is_the_measured_step_times_the_budgets():
    plan = plan_run(CHAIN, config(), TIMING)
    slower = plan_run(CHAIN, config(), StepTiming(0.2, 40_000.0, 0.5))
    assert seconds(slower, "training") - seconds(plan, "training") == pytest.approx(360 * 0.1)
    tuning_steps = (3 + 1) * 2 * 30  # trials and the confirmation, each on 2 seeds
    assert seconds(slower, "tuning") - seconds(plan, "tuning") == pytest.approx(tuning_steps * 0.1)
    assert seconds(plan, "evaluation") == pytest.approx(20_000 / 0.15 / 40_000)  # forward passes only
    assert seconds(plan_run(CHAIN, config(tuning={"n_trials": 6}), TIMING), "tuning") > seconds(plan, "tuning")


def test_validation_during_training_is_in_the_training_budget_and_estimate():
    plain = plan_run(CHAIN, config(), TIMING)
    validated = plan_run(CHAIN, config(training={"eval_every": 100, "eval_masked_tokens": 4000}), TIMING)
    budget = next(stage.budget for stage in validated.stages if stage.name == "training")
    assert budget == "360 steps of 32 x 128 tokens, validated 4 times on 4,000 masked tokens"  # 100 ... 360
    one = 4000 / 0.15 / TIMING.forward_tokens_per_second  # the protocol masks 15 %: forward passes over that many
    assert seconds(validated, "training") - seconds(plain, "training") == pytest.approx(4 * one)


def test_each_mask_rate_variant_is_estimated_with_its_validations():
    plain = plan_run(["mask_rate_comparison"], config(), TIMING, variants=3)
    validated = plan_run(["mask_rate_comparison"], config(training={"eval_every": 100, "eval_masked_tokens": 4000}),
                         TIMING, variants=3)
    one = 4000 / 0.15 / TIMING.forward_tokens_per_second
    assert validated.seconds - plain.seconds == pytest.approx(3 * 4 * one)  # 3 variants x 4 validations
    assert plain.seconds == pytest.approx(3 * (360 * 0.1 + 20_000 / 0.15 / 40_000))


def test_a_skipped_study_and_a_budget_in_epochs_are_said_so():
    plan = plan_run(CHAIN, config(tuning={"n_trials": 0}, training={"epochs": 2, "max_steps": None}), TIMING)
    stages = {stage.name: stage for stage in plan.stages}
    assert stages["tuning"].budget.startswith("skipped (tuning.n_trials=0)") and stages["tuning"].seconds is None
    assert stages["training"].seconds is None and "once the sequences are" in stages["training"].budget


def test_a_data_only_run_has_no_estimate():
    plan = plan_run(["ingestion", "tokenization", "sequences"], config(), None)
    assert plan.seconds is None and len(plan.lines()) == 1  # the stages; nothing to estimate


def test_fine_tuning_is_budgeted_by_seeds_models_and_epochs(tmp_path):
    task = tmp_path / "task.csv"
    task.write_text("text,label\na,0\nb,1\n")
    plan = plan_run(["finetune"], config(finetune={"train_path": str(task), "seeds": 2, "epochs": 3}), TIMING)
    assert plan.stages[0].budget == "2 seed(s) x 2 model(s) x 3 epoch(s) of up to 63 batches"
    assert plan.seconds == pytest.approx(2 * 2 * 3 * 63 * 0.1 * 16 / 32)


def test_a_huge_batch_is_timed_at_a_capped_batch_and_scaled(monkeypatch):
    """training.batch_size=100000 is timed at MAX_TIMED_BATCH sequences (a step of the whole batch
    would hold gigabytes before the data stages run) and scaled to the configured batch."""
    timed_batches = []

    def recording(mlm, micro_batches, *args):
        timed_batches.append(len(micro_batches[0][0]))
        return accumulate_gradients(mlm, micro_batches, *args)

    monkeypatch.setattr(plan_module, "accumulate_gradients", recording)
    cap = plan_module.MAX_TIMED_BATCH[0]
    huge = measure_step(config(**TINY, training={"batch_size": 100_000, "gradient_accumulation_steps": 2}),
                        torch.device("cpu"), budget_seconds=0.05, max_steps=1)
    assert set(timed_batches) == {cap}
    capped = measure_step(config(**TINY, training={"batch_size": cap}), torch.device("cpu"), budget_seconds=0.05,
                          max_steps=1)
    factor = 2 * 100_000 / cap  # the configured batch and its two micro-batches, against the timed one (~781x)
    assert factor / 4 < huge.step_seconds / capped.step_seconds < factor * 4  # timings of two fresh models: noisy
    assert 1 / 4 < huge.forward_tokens_per_second / capped.forward_tokens_per_second < 4  # a rate: not scaled


def test_a_study_of_continued_pretraining_is_budgeted_by_its_runs_and_two_scorings_each():
    continued = config(model={"init_from": "bert-base-chinese"}, evaluation={"corpus_path": "news.txt"},
                       tuning={"objective": "continued"})
    plan = plan_run(CHAIN, continued, TIMING)
    runs = (3 + 1) * 2  # trials and the confirmation, each on 2 seeds
    forward = (runs + 1) * 2 * 20_000 / 0.15  # each run and the starting model, on the domain and the general text
    assert seconds(plan, "tuning") == pytest.approx(runs * 30 * 0.1 + forward / 40_000)
    assert "each run scored on the domain and on the general text" in "\n".join(plan.lines())
