"""What a run will do and about how long it will take here, said before it starts.

The estimate rests on a measurement taken now, on this machine, under its present load: a few
training steps of the configured model, batch and sequence length on the run's device
(:func:`time_training_steps`: ~0.3 s, or one step where a step takes longer) and a forward pass
for the evaluations. The step-bound stages (tuning trials, training, fine-tuning, evaluations)
follow from the budgets in the parameters; the data stages and the fixed costs (model and
optimiser set-up, saving, the report) from per-MB and per-stage seconds measured on 2 CPU cores
with ``python bench/end_to_end.py`` (BENCHMARKS.md), scaled by how fast the measured step ran
against the same step there. A budget the data decide (``training.epochs``, a study that already
holds trials) leaves a stage unestimated or makes the estimate an upper bound, and the plan says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from bert_mlm.config import ExperimentConfig, MaskingConfig, TrainingConfig
from bert_mlm.core.common.device import autocast_dtype
from bert_mlm.core.model.bert import MaskedPositionsMLM, masked_lm_loss, training_flops_per_token
from bert_mlm.core.model.distributed import SINGLE
from bert_mlm.core.model.masking import mask_tokens, replacement_vocabulary
from bert_mlm.core.model.optim import Optimisation
from bert_mlm.core.train.loop import accumulate_gradients

# The work that is not training steps, as seconds on idle cores: what `python bench/end_to_end.py`
# measured on 2 cores (2026-12-06, BENCHMARKS.md "The default run") over the python_slowdown the
# same run's plan measured, so that this run's estimate reproduces it. The stages the steps decide
# (tuning, training) were within 3 % and 12 % of it there; these are a few seconds of ~2 minutes.
BUILTIN_SECONDS_PER_MB = {"ingestion": 1.0, "tokenization": 0.6, "sequences": 0.1}
BUILTIN_CORPUS_MB = 1.7  # the Python standard library's docstrings
# A corpus of files: a stage's start-up plus its seconds per MB, as the data stages measured on 1x /
# 16x / 64x Gutenberg (BENCHMARKS.md "1x, 16x, 64x and 256x Gutenberg": ingestion 0.4 / 3.0 / 10.8 s,
# tokenization 2.2 / 26.0 / 67.2 s at 6 / 97 / 387 MB): encoding per MB, and training a vocabulary per
# MB of its sample (tokenizer.training_sample_bytes, none with an inherited one). English text is the
# slower case: Chinese text encoded ~2.5x faster per MB ("Chinese data path"), so its estimate is high.
# (The built-in corpus's rates above, ~10x these, are its small files' start-ups.)
DATA_START_SECONDS = {"ingestion": 0.3, "tokenization": 1.0, "sequences": 0.1}
DATA_SECONDS_PER_MB = {"ingestion": 0.028, "tokenization": 0.13, "sequences": 0.001}
VOCABULARY_SECONDS_PER_MB = 0.12
BUILTIN_CORPUS_SECONDS = 2.3  # parsing the standard library's sources (ast) into that corpus
FIXED_SECONDS = {"tuning": 1.0, "training": 1.0, "finetune": 1.0, "evaluation": 0.5, "reporting": 0.5}
LOOP_OVERHEAD = 1.05  # the loop's batches from the memory-mapped store, records and progress, per step
RUN_SET_UP_SECONDS = 0.3  # a tuning run's model, optimiser and evaluation set
STEP_STAGES = ("tuning", "training", "finetune", "evaluation", "mask_rate_comparison")


@dataclass(frozen=True)
class StepTiming:
    """One optimizer step of the configured shape, measured here and now."""

    step_seconds: float  # forward, backward, clipping, AdamW; masking on the host
    forward_tokens_per_second: float  # forward passes under inference_mode (the evaluations)
    steps: int  # steps timed (after one warm-up step)
    seconds: float  # what measuring cost, the model's construction included
    flops_per_step: float = 0.0
    threads: int = 0


def time_training_steps(bert_config, batch_size: int, length: int, device: torch.device, precision: str,
                        mask_probability: float = 0.15, budget_seconds: float = 0.3, max_steps: int = 4,
                        accumulation: int = 1) -> StepTiming:
    """Seconds per optimizer step of a fresh model of ``bert_config`` on random tokens, through the
    training loop's own step (``accumulate_gradients`` and ``Optimisation.step``), after one
    warm-up step: steps are timed until ``budget_seconds`` or ``max_steps``; when the warm-up step
    alone took longer than the budget, it is the measurement (a slight overestimate, and no step
    spent only to be timed). The global random generators are left as they were."""
    from transformers import BertForMaskedLM

    started = time.perf_counter()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        model = BertForMaskedLM(bert_config).to(device)
        model.train()
        mlm = MaskedPositionsMLM(model)
        optimisation = Optimisation.build(model, TrainingConfig(max_steps=max_steps + 2, warmup_steps=0), device,
                                          precision)
        generator = torch.Generator().manual_seed(0)
        replacement = replacement_vocabulary(bert_config.vocab_size, [0])
        masking = MaskingConfig(probability=mask_probability)
        no_specials = torch.zeros(batch_size, length, dtype=torch.long)
        amp_dtype = autocast_dtype(precision)

        def micro_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            ids = torch.randint(1, bert_config.vocab_size, (batch_size, length), generator=generator)
            inputs, labels = mask_tokens(ids, no_specials, 0, replacement, masking, generator)
            return inputs, torch.ones_like(inputs), labels

        def step(number: int) -> None:
            micro = [micro_batch() for _ in range(accumulation)]
            loss, *_ = accumulate_gradients(mlm, micro, optimisation.scaler, amp_dtype, device, SINGLE)
            grad_norm, _ = optimisation.step(model, loss, number)
            float(grad_norm)  # the host waits for the device: the step is done

        begun = time.perf_counter()
        step(0)
        warm_up = time.perf_counter() - begun
        timed, begun = 0, time.perf_counter()
        if warm_up < budget_seconds:
            while timed < max_steps and (timed == 0 or time.perf_counter() - begun < budget_seconds):
                timed += 1
                step(timed)
        step_seconds = (time.perf_counter() - begun) / timed if timed else warm_up
        model.eval()
        inputs, attention_mask, labels = micro_batch()
        with torch.inference_mode(), torch.autocast(device.type, dtype=amp_dtype or torch.float32,
                                                    enabled=amp_dtype is not None):
            begun = time.perf_counter()
            loss, *_ = masked_lm_loss(mlm, inputs.to(device), attention_mask.to(device), labels.to(device))
            float(loss)
            forward = time.perf_counter() - begun
    flops = training_flops_per_token(bert_config, length, mask_probability) * batch_size * length * accumulation
    return StepTiming(step_seconds, batch_size * length / max(forward, 1e-9), max(timed, 1),
                      time.perf_counter() - started, flops, torch.get_num_threads())


# The probe's CPU time on the reference machine's cores (process time: what it costs, whatever
# else runs), against which its wall time here says how fast Python work runs now.
PROBE_CPU_SECONDS = 0.0185


def python_work() -> int:
    """A fixed piece of pure-Python text work (~20 ms of one core): the data stages' and the fixed
    costs' kind of work."""
    text = "the quick brown fox jumps over the lazy dog " * 40
    return sum(len(text.split()) + sum(map(len, text.split(" "))) for _ in range(900))


def python_slowdown(repeats: int = 3) -> float:
    """How much longer than on the reference machine's idle cores pure-Python work takes here now
    (the median of ``repeats`` runs of :func:`python_work`): a busy machine shares its cores."""
    seconds = []
    for _ in range(repeats):
        begun = time.perf_counter()
        python_work()
        seconds.append(time.perf_counter() - begun)
    return sorted(seconds)[len(seconds) // 2] / PROBE_CPU_SECONDS


@dataclass
class Stage:
    """One stage of the plan: its name, its budget in words, and its estimated seconds (``None``:
    not estimated; ``note`` says why)."""

    name: str
    budget: str = ""
    seconds: float | None = None
    note: str = ""


@dataclass
class Plan:
    stages: list[Stage]
    timing: StepTiming | None
    slowdown: float = 1.0  # Python work here now against the reference's idle cores
    facts: list[str] = field(default_factory=list)  # what the estimate rests on, in words

    @property
    def seconds(self) -> float | None:
        known = [s.seconds for s in self.stages if s.seconds is not None]
        return sum(known) if known else None

    @property
    def complete(self) -> bool:
        return all(s.seconds is not None for s in self.stages)

    def lines(self) -> list[str]:
        """The plan as log lines: the stages, each budget, the estimate and what it rests on."""
        lines = ["Plan: " + " -> ".join(s.name for s in self.stages)]
        lines += [f"Plan: {s.name}: {s.budget}" for s in self.stages if s.budget]
        if self.seconds is not None:
            parts, unknown = [], {}  # stages without an estimate grouped by why
            for stage in self.stages:
                if stage.seconds is None:
                    unknown.setdefault(stage.note, []).append(stage.name)
                else:
                    parts.append(f"{stage.name} {clock(stage.seconds)}")
            parts += [f"{', '.join(names)} ? ({note})" for note, names in unknown.items()]
            parts = ", ".join(parts)
            scope = "" if self.complete else " for the stages it can estimate"
            lines.append(f"Plan: estimate ~{clock(self.seconds)}{scope} on this machine now ({parts})")
        if self.facts:
            lines.append(f"Plan: {'; '.join(self.facts)}")
        return lines


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def evaluation_count(trial_steps: int, eval_every: int) -> int:
    """Evaluations of one tuning run: every ``eval_every`` steps and at the last step."""
    return len({*range(eval_every, trial_steps + 1, eval_every), trial_steps})


def plan_run(stages: Sequence[str], config: ExperimentConfig, timing: StepTiming | None,
             corpus_bytes: int | None = None, builtin_share: float = 0.0, variants: int = 0,
             slowdown: float = 1.0) -> Plan:
    """The plan of a run of ``stages`` (pipeline names, in the order they run) with ``config``:
    each stage's budget and, where it can be known, its estimated seconds. ``timing``: the step
    measured here (``None``: the step-bound stages are not estimated); ``corpus_bytes``: the
    text's size where its listing knows it; ``builtin_share``: the share of the built-in corpus
    read (0: another corpus); ``variants``: the mask-rate variants a comparison trains;
    ``slowdown``: :func:`python_slowdown`, for the work that is not training steps."""
    step = timing.step_seconds * LOOP_OVERHEAD if timing else None
    protocol = config.evaluation
    # The protocol stops at min_masked_tokens (none: the whole test split, which the data decide).
    eval_seconds = forward_seconds(config, timing, protocol.min_masked_tokens) if protocol.min_masked_tokens else None
    planned = []
    for name in stages:
        stage = Stage(name)
        if name in DATA_SECONDS_PER_MB:
            if corpus_bytes is None and not builtin_share:
                stage.note = "the corpus's size is known once it is read"
            else:
                if builtin_share:
                    megabytes = BUILTIN_CORPUS_MB * builtin_share
                    extra = BUILTIN_CORPUS_SECONDS * builtin_share if name == "ingestion" else 0.0
                    stage.seconds = (megabytes * BUILTIN_SECONDS_PER_MB[name] + extra) * slowdown
                else:
                    megabytes = corpus_bytes / 1e6
                    seconds = DATA_START_SECONDS[name] + megabytes * DATA_SECONDS_PER_MB[name]
                    trains = config.tokenizer.vocab_path is None and config.model.init_from is None
                    if name == "tokenization" and trains:
                        sample = config.tokenizer.training_sample_bytes
                        seconds += VOCABULARY_SECONDS_PER_MB * min(megabytes, sample / 1e6 if sample else megabytes)
                    stage.seconds = seconds * slowdown
                if name == "ingestion":
                    stage.budget = f"{megabytes:,.1f} MB of text" + (" (the built-in corpus)" if builtin_share else "")
        elif name == "tuning":
            stage.budget, stage.seconds = _tuning(config, step, eval_seconds, slowdown)
        elif name == "training":
            stage.budget, stage.seconds = _training(config, step, slowdown, timing)
        elif name == "finetune":
            stage.budget, stage.seconds = _finetune(config, step, slowdown)
        elif name == "evaluation":
            stage.budget = (f"the test split under the fixed protocol ({protocol.min_masked_tokens:,} masked tokens)"
                            if protocol.min_masked_tokens else "the whole test split under the fixed protocol")
            if eval_seconds is not None:
                stage.seconds = FIXED_SECONDS["evaluation"] * slowdown + eval_seconds
        elif name == "mask_rate_comparison":
            budget, per_variant = _training(config, step, slowdown, timing)  # each variant validates as training does
            stage.budget = f"{variants} variants x {budget}"
            if per_variant is not None and eval_seconds is not None:
                stage.seconds = variants * (per_variant + eval_seconds)
        else:
            stage.seconds = FIXED_SECONDS.get(name, 1.0) * slowdown
        if stage.seconds is None and not stage.note:
            stage.note = "no step measured" if timing is None else "the data decide"
        planned.append(stage)
    return Plan(planned, timing, slowdown)


def _training(config: ExperimentConfig, step: float | None, slowdown: float,
              timing: StepTiming | None = None) -> tuple[str, float | None]:
    """The training budget and its estimate; with ``training.eval_every``, its validations too
    (each one the protocol's forward passes over ``eval_masked_tokens`` masked tokens)."""
    training = config.training
    shape = f"{training.batch_size} x {config.sequences.max_length} tokens" + (
        f" x {training.gradient_accumulation_steps} micro-batches" if training.gradient_accumulation_steps > 1 else "")
    if training.max_steps is None:
        return f"{training.epochs:g} epoch(s) of batches of {shape} (the steps are known once the sequences are)", None
    seconds = None if step is None else training.max_steps * step + FIXED_SECONDS["training"] * slowdown
    budget = f"{training.max_steps:,} steps of {shape}"
    if training.eval_every:
        validations = evaluation_count(training.max_steps, training.eval_every)
        budget += f", validated {validations:,} times on {training.eval_masked_tokens:,} masked tokens"
        one = forward_seconds(config, timing, training.eval_masked_tokens)
        if seconds is not None and one is not None:
            seconds += validations * one
    return budget, seconds


def forward_seconds(config: ExperimentConfig, timing: StepTiming | None, masked_tokens: int) -> float | None:
    """The protocol's forward passes until ``masked_tokens`` are masked (at its mask probability)."""
    if timing is None:
        return None
    return masked_tokens / config.evaluation.mask_probability / timing.forward_tokens_per_second


def _tuning(config: ExperimentConfig, step: float | None, eval_seconds: float | None,
            slowdown: float) -> tuple[str, float | None]:
    tuning = config.tuning
    if tuning.n_trials == 0:
        return (f"skipped (tuning.n_trials=0): training takes the configured masking (masking.probability="
                f"{config.masking.probability:g})"), 1.0 * slowdown
    confirmation = tuning.adopt == "if_better"
    runs = (tuning.n_trials + int(confirmation)) * tuning.seeds
    budget = (f"{tuning.n_trials} trials x {tuning.seeds} seed(s) x {tuning.trial_steps} steps"
              + (f", then a paired confirmation ({tuning.seeds} run(s) of {tuning.trial_steps} steps)"
                 if confirmation else "")
              + "; at most: a study that already holds finished trials runs only the missing ones")
    if step is None:
        return budget, None
    seconds = runs * tuning.trial_steps * step + (FIXED_SECONDS["tuning"] + runs * RUN_SET_UP_SECONDS) * slowdown
    if tuning.objective == "finetune":
        finetune = _finetune(config, step, slowdown)[1]
        return budget + "; each run scored by fine-tuning", None if finetune is None else seconds + runs * finetune
    if eval_seconds is None:
        return budget, None
    share = 1.0  # a trial's evaluation set against the protocol's
    if tuning.eval_max_sequences is not None:
        masked = tuning.eval_max_sequences * config.sequences.max_length * config.evaluation.mask_probability
        share = min(1.0, masked / config.evaluation.min_masked_tokens)
    return budget, seconds + runs * evaluation_count(tuning.trial_steps, tuning.eval_every) * eval_seconds * share


def _finetune(config: ExperimentConfig, step: float | None, slowdown: float) -> tuple[str, float | None]:
    finetune = config.finetune
    if not finetune.enabled:
        return "off (finetune.train_path is not set)", 0.1 * slowdown
    models = 1 if finetune.baseline == "none" else 2
    batches = math.ceil(finetune.max_train_examples / finetune.batch_size)
    budget = f"{finetune.seeds} seed(s) x {models} model(s) x {finetune.epochs} epoch(s) of up to {batches} batches"
    if step is None or finetune.mode == "frozen":
        return budget, None
    # A fine-tuning step runs whole sequences through the encoder and a small head: about a
    # training step's work per sequence, at its own batch size.
    per_step = step * finetune.batch_size / config.training.batch_size
    return budget, finetune.seeds * models * finetune.epochs * batches * per_step + FIXED_SECONDS["finetune"] * slowdown
