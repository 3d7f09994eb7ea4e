"""What a run will do and how long its steps take here: a training step and a forward pass timed now on
the run's device (:func:`measure_step`), times the budgets. Data stages and fixed costs are not estimated
(per-MB constants once said 2:25 for a 1:30 run); the run summary sets the estimate beside the time taken."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import NamedTuple

import torch

from bert_mlm.config import ExperimentConfig, TrainingConfig
from bert_mlm.core.common.device import autocast, autocast_dtype, resolve_precision
from bert_mlm.core.common.progress import clock
from bert_mlm.core.model.bert import MaskedPositionsMLM, masked_lm_loss, planned_bert_config
from bert_mlm.core.model.construction import MODEL_LOCK
from bert_mlm.core.model.distributed import SINGLE
from bert_mlm.core.model.masking import IGNORE_INDEX
from bert_mlm.core.model.optim import Optimisation
from bert_mlm.core.train.loop import accumulate_gradients, validation_count

STEP_STAGES = ("tuning", "training", "finetune", "evaluation", "mask_rate_comparison")
# The largest batch a step is timed at (CPU, CUDA), scaled linearly to the configured one: a huge
# training.batch_size must not cost the plan its memory before the data stages have run.
MAX_TIMED_BATCH = (256, 1024)


class StepTiming(NamedTuple):
    step_seconds: float  # one optimizer step: forward, backward, clipping, AdamW (not the host's masking)
    forward_tokens_per_second: float  # forward passes under inference_mode (the evaluations)
    seconds: float  # what measuring cost, the model's construction included


def measure_step(config: ExperimentConfig, device: torch.device, budget_seconds: float = 0.3,
                 max_steps: int = 4) -> StepTiming:
    """A fresh model's optimizer steps through the loop's own step on random tokens, timed after a warm-up step until
    ``budget_seconds`` or ``max_steps`` (a longer warm-up is the measurement) on at most :data:`MAX_TIMED_BATCH` of
    the configured sequences, scaled to the configured batch and its micro-batches; global generators kept."""
    from transformers import BertForMaskedLM

    started, training = time.perf_counter(), config.training
    timed, length = min(training.batch_size, MAX_TIMED_BATCH[device.type == "cuda"]), config.sequences.max_length
    bert = planned_bert_config(config.model, config.tokenizer.vocab_size, config.tokenizer.extend_vocabulary)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        with MODEL_LOCK:
            model = BertForMaskedLM(bert).to(device).train()
        precision = resolve_precision(training.precision, device)
        mlm, amp_dtype = MaskedPositionsMLM(model), autocast_dtype(precision)
        optimisation = Optimisation.build(model, TrainingConfig(max_steps=max_steps + 2, warmup_steps=0), device,
                                          precision)
        generator = torch.Generator().manual_seed(0)  # random tokens, the masking's share of them predicted
        ids = torch.randint(1, bert.vocab_size, (timed, length), generator=generator)
        labels = ids.masked_fill(torch.rand(ids.shape, generator=generator) >= config.masking.probability,
                                 IGNORE_INDEX)
        batch = (ids, torch.ones_like(ids), labels)

        def step(number: int) -> float:  # seconds: the host waits for the device, so the step is done
            begun = time.perf_counter()
            loss, *_ = accumulate_gradients(mlm, [batch], optimisation.scaler, amp_dtype, device, SINGLE)
            float(optimisation.step(model, loss, number)[0])
            return time.perf_counter() - begun

        warm_up, steps = step(0), []
        while warm_up < budget_seconds and len(steps) < max_steps and sum(steps) < budget_seconds:
            steps.append(step(len(steps) + 1))
        with torch.inference_mode(), autocast(device, amp_dtype):
            begun = time.perf_counter()
            float(masked_lm_loss(mlm.eval(), *(tensor.to(device) for tensor in batch))[0])
            forward = time.perf_counter() - begun
    step_seconds = (sum(steps) / len(steps) if steps else warm_up) * training.batch_size / timed
    return StepTiming(step_seconds * training.gradient_accumulation_steps, timed * length / max(forward, 1e-9),
                      time.perf_counter() - started)


class Stage(NamedTuple):
    name: str
    budget: str = ""  # in words
    seconds: float | None = None  # its steps and forward passes at the measured rates (None: not estimated)


class Plan(NamedTuple):
    stages: list[Stage]
    timing: StepTiming | None

    @property
    def seconds(self) -> float | None:
        return sum(known) if (known := [stage.seconds for stage in self.stages if stage.seconds is not None]) else None

    def lines(self) -> list[str]:
        lines = ["Plan: " + " -> ".join(stage.name for stage in self.stages)]
        lines += [f"Plan: {stage.name}: {stage.budget}" for stage in self.stages if stage.budget]
        if self.seconds is not None:
            parts = ", ".join(f"{stage.name} {clock(stage.seconds)}" for stage in self.stages if stage.seconds)
            lines.append(f"Plan: steps and forward passes ~{clock(self.seconds)} on this machine now ({parts}); a "
                         f"training step measured at {self.timing.step_seconds:.3f} s (in {self.timing.seconds:.1f} s)")
        return lines


def plan_run(stages: Sequence[str], config: ExperimentConfig, timing: StepTiming | None, variants: int = 0) -> Plan:
    """Each of ``stages`` (pipeline names, in run order) with its budget and, for stages of steps and forward passes,
    ``timing``'s estimate; ``variants``: the mask-rate variants a comparison trains."""
    training, tuning, finetune, protocol = config.training, config.tuning, config.finetune, config.evaluation
    evaluation = (protocol.min_masked_tokens or 0) / protocol.mask_probability  # forward tokens: masked / rate

    def seconds(steps: float | None, forward_tokens: float = 0.0) -> float | None:
        return None if timing is None or steps is None else (steps * timing.step_seconds
                                                             + forward_tokens / timing.forward_tokens_per_second)

    shape = f"{training.batch_size} x {config.sequences.max_length} tokens" + (
        f" x {training.gradient_accumulation_steps} micro-batches" if training.gradient_accumulation_steps > 1 else "")
    steps, every = training.max_steps, training.eval_every
    checks = validation_count(steps or 0, every)
    budget = (f"{training.epochs:g} epoch(s) of {shape} (the steps are known once the sequences are)" if steps is None
              else f"{steps:,} steps of {shape}" + (
                  f", validated {checks:,} times on {training.eval_masked_tokens:,} masked tokens" if checks else ""))
    validations = checks * training.eval_masked_tokens / protocol.mask_probability
    # A fine-tuning sequence costs about a training one (encoder, small head); frozen mode's fit is not estimated.
    models, tasks = 1 + len(finetune.baselines), max(len(finetune.task_configs()), 1)
    batches = math.ceil(finetune.max_train_examples / finetune.batch_size)
    tuned = None if finetune.mode == "frozen" else (
        tasks * finetune.seeds * models * finetune.epochs * batches * finetune.batch_size / training.batch_size)
    confirmed, trial_steps = tuning.adopt == "if_better", tuning.trial_steps
    runs = (tuning.n_trials + confirmed) * tuning.seeds
    trial_tokens = min(evaluation, (tuning.eval_max_sequences or math.inf) * config.sequences.max_length)  # one scoring
    scored_by, study_seconds = {  # continued: each run and the starting model, on the domain and the general text
        "finetune": ("by fine-tuning", seconds(None if tuned is None else runs * (trial_steps + tuned))),
        "continued": ("on the domain and on the general text, against the starting model",
                      seconds(runs * trial_steps, (runs + 1) * 2 * trial_tokens)),
    }.get(tuning.objective, ("", seconds(runs * trial_steps,
                                         runs * validation_count(trial_steps, tuning.eval_every) * trial_tokens)))
    study = (f"{tuning.n_trials} trials x {tuning.seeds} seed(s) x {trial_steps} steps" + (
        f", then a paired confirmation ({tuning.seeds} run(s) of {trial_steps} steps)" if confirmed else "")
        + "; at most: a study that already holds trials runs the missing ones"
        + (f"; each run scored {scored_by}" if scored_by else ""))
    tuned_text = f"{f'{tasks} tasks x ' if tasks > 1 else ''}{finetune.seeds} seed(s) x {models} model(s) x " \
                 f"{finetune.epochs} epoch(s) of up to {batches} batches"
    known = (Stage("training", budget, seconds(steps, validations)),
             Stage("finetune", tuned_text, seconds(tuned)) if finetune.enabled
             else Stage("finetune", "off (finetune.train_path is not set)"),
             Stage("tuning", study, study_seconds) if tuning.n_trials
             else Stage("tuning", "skipped (tuning.n_trials=0): training takes the configured masking "
                                  f"(masking.probability={config.masking.probability:g})"),
             Stage("evaluation", f"the fixed protocol's {protocol.min_masked_tokens:,} masked tokens",
                   seconds(0, evaluation)) if protocol.min_masked_tokens
             else Stage("evaluation", "the whole test split under the fixed protocol"),
             Stage("mask_rate_comparison", f"{variants} variants x {budget}",
                   seconds(None if steps is None else variants * steps, variants * (validations + evaluation))))
    return Plan([next((stage for stage in known if stage.name == name), Stage(name)) for name in stages], timing)
