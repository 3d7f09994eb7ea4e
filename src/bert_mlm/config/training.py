"""``training``: the optimisation, its budget, the device and the checkpoints."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from bert_mlm.config.base import Section
from bert_mlm.errors import UserError

SCHEDULES = ("linear", "cosine", "constant_with_warmup")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
Positive = Annotated[float, Field(gt=0)]
AUTO = "auto"
# From scratch, "auto" is 2e-3 x 128 / hidden_size (1/width, as muP prescribes for Adam on hidden
# weights: a 4-layer 256-wide model stayed on the unigram plateau for 300 steps at 2e-3 and left it
# at 1e-3, BENCHMARKS.md) with a warmup of 10 % of the step budget (36 of the default 360 steps;
# every benchmark trains with 10 %).
AUTO_LR_BASE, AUTO_LR_WIDTH, AUTO_WARMUP_FRACTION = 2e-3, 128, 0.1
# Local initialisation (model.initialisation) wider than AUTO_LR_WIDTH trains at this share of that rule:
# 4 x 256 at 5e-4 reached the HF recipe's 900-step quality in 1/12 of the recipe's time (BERT's draw at
# 1e-3, the earlier default: 1/8.6, side by side); local at 1e-3 did worse than BERT's draw (BENCHMARKS.md,
# "Time to quality").
LOCAL_WIDE_LR_FACTOR = 0.5
# Continued pretraining (model.init_from): the from-scratch rule times this factor, and this share
# of the budget as warmup, chosen by bench/continued_pretraining.py (BENCHMARKS.md, "Continued
# pretraining"; docs/continued-pretraining.md).
CONTINUED_LR_FACTOR, CONTINUED_WARMUP_FRACTION = 0.1, 0.1


class TrainingConfig(Section):
    """The optimisation and its budget, the device, the checkpoints"""

    SECTION = "training"

    max_steps: int | None = Field(
        360, gt=0, description="optimizer steps (~45 s on 2 quiet CPU cores); null when epochs sets the budget")
    epochs: float | None = Field(
        None, gt=0, description="passes over the training sequences instead of max_steps (then set max_steps: null)")
    batch_size: int = Field(32, gt=0, description="sequences per micro-batch")
    gradient_accumulation_steps: int = Field(1, gt=0, description="micro-batches per optimizer step")
    learning_rate: Positive | Literal["auto"] = Field(
        AUTO, description="peak, after warmup; auto = 2e-3 x 128 / model.hidden_size (2e-3 at 128), halved for local "
                          "initialisation wider than 128 (5e-4 at 256); with model.init_from, the "
                          "continued-pretraining rule (docs/continued-pretraining.md)")
    weight_decay: float = Field(0.01, ge=0, description="AdamW's decoupled weight decay (not on biases and norms)")
    adam_beta1: float = Field(0.9, ge=0, lt=1, description="AdamW's first-moment decay")
    adam_beta2: float = Field(0.98, ge=0, lt=1, description="AdamW's second-moment decay")
    adam_epsilon: float = Field(1e-6, gt=0, description="AdamW's epsilon")
    warmup_steps: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        AUTO, description="steps of linear warmup to the peak learning rate; auto = 10 % of the step budget (36 of "
                          "360); with model.init_from, the continued-pretraining rule")
    schedule: Literal[SCHEDULES] = Field("linear", description="linear | cosine | constant_with_warmup")
    max_grad_norm: float | None = Field(1.0, gt=0, description="gradient clipping (after unscaling); null: none")
    seed: int = Field(42, ge=0, description="initial weights, data order, masks and dropout")
    precision: Literal[PRECISIONS] = Field(
        "auto", description="auto | fp32 | bf16 | fp16 (auto: bf16/fp16 on CUDA, fp32 on CPU)")
    device: str = Field("auto", min_length=1, description="auto | cpu | cuda | cuda:N")
    bucketing: bool = Field(True, description="length-bucketed batches (less padding)")
    checkpoint_every: int = Field(0, ge=0, description="steps between checkpoints (0: none)")
    checkpoint_dir: str | None = Field(
        None, description="where checkpoints go (one folder per run inside); needed by checkpoint_every and resume")
    keep_checkpoints: int = Field(2, ge=0, description="the newest checkpoints kept per run (0: all)")
    resume: bool = Field(False, description="true: continue from the last checkpoint in checkpoint_dir")
    max_nonfinite_steps: int = Field(
        5, gt=0, description="consecutive steps with a non-finite loss or gradient before the run stops")
    progress: bool = Field(True, description="a progress bar (a line per tenth in log files)")
    # Off by default: on the one GPU measured it helped at batch 256 (+18 %) and hurt at 1024
    # (-20 %); measure per configuration (BENCHMARKS.md).
    compile: bool | Literal[COMPILE_MODES] = Field(
        False, description="true | a torch.compile mode (reduce-overhead, max-autotune, ...): the encoder under "
                           "torch.compile; off until a device measurement says it pays (docs/gpu-and-performance.md)")
    # The history still has every step; a non-finite streak is seen at the next read.
    record_every: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        "auto", description="steps between host reads of the loss (a device sync): auto = 10 on GPU, 1 on CPU")
    eval_every: int | None = Field(
        0, ge=0, description="validation during training: the fixed protocol on the valid split every N steps, in "
                             "the history and the report (0 or null: off; conf/gpu: 1000)")
    # The budget bounds the cost: at 4,096, one validation took 1.16 training steps of 32 x 128 tokens
    # (CPU, 4 x 256 model: every 20 steps is 5.7 % of the time; at 20,000, 6.6 steps; BENCHMARKS.md).
    # Every validation scores the same masks, so the curve's points are paired.
    eval_masked_tokens: int = Field(
        4096, gt=0, description="each validation's budget of masked tokens (CPU, 4 x 256 model: as long as 1.2 "
                                "training steps of 32 x 128 tokens)")
    keep_best: bool = Field(
        False, description="true: the saved model is the step with the lowest validation loss (needs eval_every)")
    # torch's default pool has a thread per core of the machine: it ignores affinity masks and
    # cgroup quotas, and under load its threads wait on each other (BENCHMARKS.md, "CPU threads").
    threads: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        "auto", description="torch's CPU threads for the whole run: auto = OMP_NUM_THREADS when set, else the CPUs "
                            "this process may use (affinity mask, cgroup quota)")

    @model_validator(mode="after")
    def _budget_and_checkpoints(self) -> TrainingConfig:
        if self.epochs is not None and self.max_steps is not None:
            raise UserError(f"training.epochs: {self.epochs:g} and training.max_steps: {self.max_steps} both set the "
                            "training budget; set the other one to null (--params "
                            f"training.epochs={self.epochs:g},training.max_steps=null)")
        if self.epochs is None and self.max_steps is None:
            raise UserError("training.max_steps: null needs training.epochs (passes over the data) as the budget")
        if (self.checkpoint_every or self.resume) and not self.checkpoint_dir:
            raise UserError("training.checkpoint_dir: required when checkpoint_every > 0 or resume is true")
        if self.keep_best and not self.eval_every:
            raise UserError("training.keep_best: picks the step with the best validation loss; set training.eval_every "
                            "(e.g. 100) to validate during training")
        return self

    def peak_learning_rate(self, hidden_size: int, continued: bool = False, local: bool = False) -> float:
        """The learning rate after warmup: the configured one, or ``auto``'s rule for a model of
        ``hidden_size`` trained from scratch (from ``local`` initialisation or not) or ``continued``
        (``model.init_from``)."""
        if self.learning_rate != AUTO:
            return float(self.learning_rate)
        factor = CONTINUED_LR_FACTOR if continued else LOCAL_WIDE_LR_FACTOR if self.halves_auto_rate(
            hidden_size, local) else 1.0
        return AUTO_LR_BASE * AUTO_LR_WIDTH / hidden_size * factor

    def halves_auto_rate(self, hidden_size: int, local: bool) -> bool:
        """Whether ``auto`` halves the from-scratch rate: local initialisation wider than 128."""
        return self.learning_rate == AUTO and local and hidden_size > AUTO_LR_WIDTH

    def warmup_for(self, max_steps: int, continued: bool = False) -> int:
        """Warmup steps of a run of ``max_steps``: the configured number, or ``auto``'s share."""
        if self.warmup_steps != AUTO:
            return self.warmup_steps
        return round((CONTINUED_WARMUP_FRACTION if continued else AUTO_WARMUP_FRACTION) * max_steps)

    def step_budget(self, train_sequences: int) -> int:
        """Optimizer steps of the run: ``max_steps``, or ``epochs`` passes over the training sequences."""
        if self.epochs is None:
            return self.max_steps
        batches_per_epoch = math.ceil(train_sequences / self.batch_size)
        return max(1, math.ceil(self.epochs * batches_per_epoch / self.gradient_accumulation_steps))

    def resolved(self, hidden_size: int, continued: bool, train_sequences: int,
                 local: bool = False) -> tuple[TrainingConfig, str]:
        """This configuration with ``auto`` learning rate and warmup as the numbers it trains with
        (a ``continued`` or halved run's learning rate; otherwise the loop applies the same rule and
        the value stays ``auto``), and one line that says where they came from."""
        steps, halved = self.step_budget(train_sequences), not continued and self.halves_auto_rate(hidden_size, local)
        warmup, rate = self.warmup_for(steps, continued), self.peak_learning_rate(hidden_size, continued, local)
        if self.learning_rate != AUTO:
            origin = "training.learning_rate"
        elif continued:
            origin = (f"auto for continued pretraining (model.init_from): {CONTINUED_LR_FACTOR:g} x the from-scratch "
                      f"rule 2e-3 x 128 / hidden size {hidden_size}, measured in BENCHMARKS.md")
        else:
            origin = f"auto: 2e-3 x 128 / hidden size {hidden_size}" + (
                ", halved for local initialisation wider than 128" if halved else "")
        fraction = CONTINUED_WARMUP_FRACTION if continued else AUTO_WARMUP_FRACTION
        warmup_origin = (f"auto: {fraction:.0%} of {steps} steps" if self.warmup_steps == AUTO
                         else "training.warmup_steps")
        resolved = self.replace(learning_rate=rate if continued or halved else self.learning_rate, warmup_steps=warmup)
        return resolved, f"learning rate {rate:.3g} ({origin}), warmup {warmup} steps ({warmup_origin})"

    def record_window(self, device) -> int:
        """Steps between host reads: ``record_every``, or for ``auto`` every step on the CPU (its
        values are read without a device sync, and a short run's progress moves step by step) and
        every 10th on an accelerator (``device``: a ``torch.device``)."""
        if self.record_every != "auto":
            return self.record_every
        return 1 if device.type == "cpu" else 10
