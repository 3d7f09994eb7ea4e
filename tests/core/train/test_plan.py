"""The run's plan: a training step measured here, and the budgets and estimate built on it."""

from __future__ import annotations

import pytest
import torch

from bert_mlm.config import ExperimentConfig, ModelConfig
from bert_mlm.core.model.bert import planned_bert_config
from bert_mlm.core.train.plan import LOOP_OVERHEAD, StepTiming, clock, evaluation_count, plan_run, time_training_steps

CHAIN = ["ingestion", "tokenization", "sequences", "tuning", "training", "finetune", "evaluation", "reporting"]
TIMING = StepTiming(step_seconds=0.1, forward_tokens_per_second=40_000.0, steps=3, seconds=0.5)


def config(**sections) -> ExperimentConfig:
    return ExperimentConfig.from_parameters(sections)


def test_a_training_step_is_timed_without_touching_the_random_state():
    tiny = planned_bert_config(ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=64, max_position_embeddings=64), vocab_size=500)
    torch.manual_seed(7)
    before = torch.get_rng_state()
    timing = time_training_steps(tiny, batch_size=8, length=64, device=torch.device("cpu"), precision="fp32",
                                 budget_seconds=0.2, max_steps=3)
    assert torch.equal(torch.get_rng_state(), before)  # the run's seeds draw what they would have drawn
    assert 0 < timing.step_seconds < timing.seconds and 1 <= timing.steps <= 3
    assert timing.forward_tokens_per_second > 0 and timing.flops_per_step > 0
    assert timing.threads == torch.get_num_threads()


def test_the_default_plan_names_every_stage_and_budget():
    plan = plan_run(CHAIN, config(), TIMING, builtin_share=1.0)
    lines = plan.lines()
    assert lines[0] == "Plan: " + " -> ".join(CHAIN)
    text = "\n".join(lines)
    assert "ingestion: 1.7 MB of text (the built-in corpus)" in text
    assert "tuning: 3 trials x 2 seed(s) x 30 steps, then a paired confirmation (2 run(s) of 30 steps)" in text
    assert "training: 360 steps of 32 x 128 tokens" in text
    assert "finetune: off (finetune.train_path is not set)" in text
    assert "evaluation: the test split under the fixed protocol (20,000 masked tokens)" in text
    assert plan.complete and lines[-1].startswith(f"Plan: estimate ~{clock(plan.seconds)} on this machine now (")


def test_the_estimate_follows_the_measured_step_and_the_budgets():
    plan = plan_run(CHAIN, config(), TIMING, builtin_share=1.0)
    slower = plan_run(CHAIN, config(), StepTiming(0.2, 40_000.0, 3, 0.5), builtin_share=1.0)
    seconds = {stage.name: stage.seconds for stage in plan.stages}
    twice = {stage.name: stage.seconds for stage in slower.stages}
    assert twice["training"] - seconds["training"] == pytest.approx(360 * 0.1 * LOOP_OVERHEAD)
    tuning_steps = (3 + 1) * 2 * 30  # trials and the confirmation, each on 2 seeds
    assert twice["tuning"] - seconds["tuning"] == pytest.approx(tuning_steps * 0.1 * LOOP_OVERHEAD)
    assert twice["ingestion"] == seconds["ingestion"]  # data stages: not training steps
    more_trials = plan_run(CHAIN, config(tuning={"n_trials": 6}), TIMING, builtin_share=1.0)
    assert next(s.seconds for s in more_trials.stages if s.name == "tuning") > seconds["tuning"]
    busier = plan_run(CHAIN, config(), TIMING, builtin_share=1.0, slowdown=3.0)
    assert next(s.seconds for s in busier.stages if s.name == "ingestion") == pytest.approx(3 * seconds["ingestion"])


def test_validation_during_training_is_in_the_training_budget_and_estimate():
    plain = plan_run(CHAIN, config(), TIMING, builtin_share=1.0)
    validated = plan_run(CHAIN, config(training={"eval_every": 100, "eval_masked_tokens": 4000}), TIMING,
                         builtin_share=1.0)
    before, after = (next(s for s in plan.stages if s.name == "training") for plan in (plain, validated))
    assert after.budget == "360 steps of 32 x 128 tokens, validated 4 times on 4,000 masked tokens"  # 100 ... 360
    one = 4000 / 0.15 / TIMING.forward_tokens_per_second  # the protocol masks 15 %: forward passes over that many
    assert after.seconds - before.seconds == pytest.approx(4 * one)


def test_each_mask_rate_variant_is_estimated_with_its_validations():
    plain = plan_run(["mask_rate_comparison"], config(), TIMING, variants=3)
    validated = plan_run(["mask_rate_comparison"], config(training={"eval_every": 100, "eval_masked_tokens": 4000}),
                         TIMING, variants=3)
    one = 4000 / 0.15 / TIMING.forward_tokens_per_second
    assert validated.stages[0].seconds - plain.stages[0].seconds == pytest.approx(3 * 4 * one)  # 3 variants x 4


def test_a_skipped_study_and_a_budget_in_epochs_are_said_so():
    plan = plan_run(CHAIN, config(tuning={"n_trials": 0}, training={"epochs": 2, "max_steps": None}), TIMING,
                    corpus_bytes=5_000_000)
    stages = {stage.name: stage for stage in plan.stages}
    assert stages["tuning"].budget.startswith("skipped (tuning.n_trials=0)")
    assert stages["training"].seconds is None and "once the sequences are" in stages["training"].budget
    assert stages["ingestion"].budget == "5.0 MB of text"
    assert not plan.complete and "for the stages it can estimate" in plan.lines()[-1]
    assert "training ? (the data decide)" in plan.lines()[-1]


def test_a_data_only_run_is_estimated_without_a_step():
    plan = plan_run(["ingestion", "tokenization", "sequences"], config(), None, corpus_bytes=None)
    assert [stage.note for stage in plan.stages] == ["the corpus's size is known once it is read"] * 3
    assert len(plan.lines()) == 1  # the stages, no estimate to give
    sized = plan_run(["ingestion", "tokenization", "sequences"], config(), None, corpus_bytes=2_000_000)
    assert sized.complete and sized.seconds > 0


@pytest.mark.parametrize(("megabytes", "measured"), [(6, 2.7), (97, 29.0), (387, 78.1)])
def test_a_file_corpus_is_estimated_as_the_data_stages_measured_at_scale(megabytes, measured):
    """Gutenberg's data stages at 1x / 16x / 64x (BENCHMARKS.md): within 25 %; the estimate used to grow
    ~1.7 s a MB (the built-in corpus's small files), 8x the measured at 387 MB. An inherited vocabulary
    trains nothing: less."""
    stages = ["ingestion", "tokenization", "sequences"]
    size = megabytes * 1_000_000
    plan = plan_run(stages, config(), None, corpus_bytes=size)
    assert plan.seconds == pytest.approx(measured, rel=0.25)
    inherited = plan_run(stages, config(tokenizer={"vocab_path": "vocab.txt"}), None, corpus_bytes=size)
    assert inherited.seconds < plan.seconds


def test_fine_tuning_is_budgeted_by_seeds_models_and_epochs(tmp_path):
    task = tmp_path / "task.csv"
    task.write_text("text,label\na,0\nb,1\n")
    plan = plan_run(["finetune"], config(finetune={"train_path": str(task), "seeds": 2, "epochs": 3}), TIMING)
    assert plan.stages[0].budget == "2 seed(s) x 2 model(s) x 3 epoch(s) of up to 63 batches"
    assert plan.stages[0].seconds > 2 * 2 * 3 * 63 * 0.1 * 16 / 32


@pytest.mark.parametrize(("steps", "every", "count"), [(30, 15, 2), (30, 7, 5), (4, 2, 2), (5, 10, 1)])
def test_a_trial_is_evaluated_every_eval_every_steps_and_at_its_end(steps, every, count):
    assert evaluation_count(steps, every) == count


def test_a_huge_batch_is_timed_at_a_capped_batch_and_scaled(monkeypatch):
    """training.batch_size=100000 is timed at PLAN_MAX_BATCH sequences (a step of the whole
    batch would hold gigabytes before the data stages run) and scaled to the configured batch."""
    from bert_mlm import hooks

    measured, timings = [], []
    real = hooks.time_training_steps

    def recording(bert, batch_size, *args, **kwargs):
        measured.append(batch_size)
        timings.append(real(bert, batch_size, *args, **{**kwargs, "budget_seconds": 0.05, "max_steps": 1}))
        return timings[-1]

    monkeypatch.setattr(hooks, "time_training_steps", recording)
    small = {"model": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
                       "max_position_embeddings": 64},
             "sequences": {"max_length": 32}, "tokenizer": {"vocab_size": 500}}
    huge, _ = hooks.measure_step(config(**small, training={"batch_size": 100_000}), torch.device("cpu"), 1)
    assert measured == [hooks.PLAN_MAX_BATCH[0]]
    factor = 100_000 / hooks.PLAN_MAX_BATCH[0]
    assert huge.step_seconds == pytest.approx(timings[0].step_seconds * factor)
    assert huge.flops_per_step == pytest.approx(timings[0].flops_per_step * factor)
    assert huge.forward_tokens_per_second == timings[0].forward_tokens_per_second  # a rate: not scaled
