"""What a training run is configured with, and the token ids it needs: the types that the loop,
the optimiser, the experiment and the data stages share, in a module below all of them (the
loop imports the optimiser, which must not import the loop back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from bert_mlm.core.device import PRECISIONS
from bert_mlm.core.errors import UserError
from bert_mlm.core.masking import replacement_vocabulary
from bert_mlm.core.sequences import Collator
from bert_mlm.core.tokenizer import special_token_ids
from bert_mlm.core.words import continuation_ids

SCHEDULES = ("linear", "cosine", "constant_with_warmup")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TrainingConfig:
    max_steps: int = 360
    # When set, the budget is this many passes over the training sequences instead of max_steps.
    epochs: float | None = None
    batch_size: int = 32
    gradient_accumulation_steps: int = 1
    # "auto": 2e-3 x 128 / hidden_size (1/width, as muP prescribes for Adam on hidden weights):
    # 2e-3 for a 128-wide model, 1e-3 at 256. Measured here: a 4-layer 256-wide model stayed on
    # the unigram plateau for 300 steps at 2e-3 and left it at 1e-3 (BENCHMARKS.md).
    learning_rate: float | str = "auto"
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-6
    warmup_steps: int = 36
    schedule: str = "linear"
    max_grad_norm: float = 1.0
    seed: int = 42
    precision: str = "auto"
    device: str = "auto"
    bucketing: bool = True
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None
    keep_checkpoints: int = 2
    resume: bool = False
    max_nonfinite_steps: int = 5
    progress: bool = True
    # false | true | a torch.compile mode: the encoder under torch.compile. Off by default: on the
    # one GPU measured it helped at batch 256 (+18 %) and hurt at 1024 (-20 %), and no device
    # measurement of this option exists yet (BENCHMARKS.md); measure per configuration.
    compile: bool | str = False
    # Steps between host reads of the loss, gradient norm and non-finite flags (one device sync
    # each): the history still has every step; a non-finite streak is seen at the next read.
    # ``auto``: 10 on an accelerator, every step on the CPU, where reading a value costs no sync.
    record_every: int | str = "auto"
    # Validation during training: every this many optimizer steps (and at the last), the fixed
    # evaluation protocol on a bounded subset of the valid split, written to the history
    # (valid_loss, valid_accuracy, ...) and drawn beside the training loss. 0 or null: off.
    eval_every: int | None = 0
    # Each validation scores about this many masked tokens (whole blocks of 256 sequences): its
    # cost. At 4,096, 1.2 training steps of 32 x 128 tokens (CPU, 4 x 256 model: every 20 steps is
    # 6 % of the time; BENCHMARKS.md). Every validation scores the same masks: the curve is paired.
    eval_masked_tokens: int = 4096
    # Keep the weights of the step with the lowest validation loss as the trained model (the
    # training summary's kept_step); needs eval_every.
    keep_best: bool = False

    def __post_init__(self) -> None:
        for name in ("max_steps", "batch_size", "gradient_accumulation_steps"):
            _check_positive_integer(name, getattr(self, name))
        if self.record_every != "auto":
            _check_positive_integer("record_every", self.record_every, " or 'auto'")
        if self.eval_every is not None and (
            not isinstance(self.eval_every, int) or isinstance(self.eval_every, bool) or self.eval_every < 0
        ):
            raise UserError(f"training.eval_every: {self.eval_every!r} must be an integer >= 0 (0 or null: off)")
        _check_positive_integer("eval_masked_tokens", self.eval_masked_tokens)
        if not isinstance(self.keep_best, bool):
            raise UserError(f"training.keep_best: {self.keep_best!r} must be true or false")
        if self.keep_best and not self.eval_every:
            raise UserError("training.keep_best: picks the step with the best validation loss; set training.eval_every "
                            "(e.g. 100) to validate during training")
        if self.epochs is not None and not self.epochs > 0:
            raise UserError(f"training.epochs: {self.epochs!r} must be > 0 (or null to use max_steps)")
        if self.learning_rate != "auto" and not (
            isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0
        ):
            raise UserError(f"training.learning_rate: {self.learning_rate!r} must be > 0 or 'auto'")
        if self.warmup_steps < 0:
            raise UserError(f"training.warmup_steps: {self.warmup_steps!r} must be >= 0")
        if self.schedule not in SCHEDULES:
            raise UserError(f"training.schedule: {self.schedule!r} is not one of {SCHEDULES}")
        if self.precision not in PRECISIONS:
            raise UserError(f"training.precision: {self.precision!r} is not one of {PRECISIONS}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise UserError(f"training.max_grad_norm: {self.max_grad_norm!r} must be > 0 (or null)")
        if self.checkpoint_every < 0:
            raise UserError(f"training.checkpoint_every: {self.checkpoint_every!r} must be >= 0")
        if (self.checkpoint_every or self.resume) and not self.checkpoint_dir:
            raise UserError("training.checkpoint_dir: required when checkpoint_every > 0 or resume is true")
        if not isinstance(self.compile, bool) and self.compile not in COMPILE_MODES:
            raise UserError(f"training.compile: {self.compile!r} must be true, false or a torch.compile mode "
                            f"({', '.join(COMPILE_MODES)})")

    def record_window(self, device: torch.device) -> int:
        """Steps between host reads: ``record_every``, or for ``auto`` every step on the CPU (its
        values are read without a device sync, and a short run's progress moves step by step) and
        every 10th on an accelerator."""
        if self.record_every != "auto":
            return self.record_every
        return 1 if device.type == "cpu" else 10


def _check_positive_integer(name: str, value, alternatives: str = "") -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UserError(f"training.{name}: {value!r} must be a positive integer{alternatives}")


@dataclass
class TokenIds:
    """The token ids the loop needs, taken from the tokenizer."""

    pad: int
    mask: int
    special: Sequence[int]
    replacement: torch.Tensor
    continuation: Sequence[int] = ()  # WordPiece ``##`` pieces: they continue a word

    @classmethod
    def from_tokenizer(cls, tokenizer: PreTrainedTokenizerBase) -> TokenIds:
        special = special_token_ids(tokenizer)
        return cls(
            pad=tokenizer.pad_token_id,
            mask=tokenizer.mask_token_id,
            special=special,
            replacement=replacement_vocabulary(len(tokenizer), special),
            continuation=continuation_ids(tokenizer.get_vocab()).tolist(),
        )

    def collator(self, max_length: int, padding: str = "dynamic", whole_word: bool = False) -> Collator:
        return Collator(self.pad, self.special, max_length, padding, whole_word, self.continuation)
