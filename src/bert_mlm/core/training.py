"""The training loop: dynamic masking, native AMP, accumulation, clipping, schedule, checkpoints.

One optimizer step consumes ``gradient_accumulation_steps`` micro-batches. With a GradScaler
(fp16) the order is scale -> backward -> ``unscale_`` -> clip -> step -> update, so the clipping
threshold applies to the true gradients (the tutorial clipped the scaled ones).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd
import torch
from torch.nn.parallel import DistributedDataParallel
from transformers import BertForMaskedLM, PreTrainedTokenizerBase, get_scheduler

from bert_mlm.core.checkpoints import (
    load_checkpoint,
    refuse_other_runs,
    restore_rng_states,
    rng_states,
    run_fingerprint,
    run_folder,
    save_checkpoint,
    seed_everything,
)
from bert_mlm.core.distributed import SINGLE, Rank, all_reduce_sum, gather_objects
from bert_mlm.core.errors import UserError
from bert_mlm.core.masking import (
    DROPOUT_STREAM,
    ORDER_STREAM,
    MaskingConfig,
    mask_generator,
    mask_seed,
    mask_tokens,
    replacement_vocabulary,
)
from bert_mlm.core.model import MaskedPositionsMLM, masked_lm_loss
from bert_mlm.core.progress import Progress
from bert_mlm.core.sequences import Batches, Collator, batch_order, sequence_lengths
from bert_mlm.core.words import continuation_ids

logger = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
SCHEDULES = ("linear", "cosine", "constant_with_warmup")


class NonFiniteLossError(RuntimeError):
    """The loss stayed NaN/inf for too many consecutive steps."""


@dataclass(frozen=True)
class TrainingConfig:
    max_steps: int = 1000
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
    warmup_steps: int = 100
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

    def __post_init__(self) -> None:
        for name in ("max_steps", "batch_size", "gradient_accumulation_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise UserError(f"training.{name}: {value!r} must be a positive integer")
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
        special = sorted(set(tokenizer.all_special_ids))
        return cls(
            pad=tokenizer.pad_token_id,
            mask=tokenizer.mask_token_id,
            special=special,
            replacement=replacement_vocabulary(len(tokenizer), special),
            continuation=continuation_ids(tokenizer.get_vocab()).tolist(),
        )

    def collator(self, max_length: int, padding: str = "dynamic", whole_word: bool = False) -> Collator:
        return Collator(self.pad, self.special, max_length, padding, whole_word, self.continuation)


@dataclass
class TrainingResult:
    history: pd.DataFrame
    train_tokens: int
    seconds: float
    device: str
    precision: str
    learning_rate: float = 0.0
    resumed_from_step: int = 0
    extras: dict = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        return self.train_tokens / self.seconds if self.seconds > 0 else 0.0


# ----------------------------------------------------------------------------- device & precision
def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as error:
        raise UserError(f"training.device: {requested!r} is not a device name ({error})") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"training.device: {requested!r} was requested but CUDA is not available")
    return device


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto``: bf16 on CUDA GPUs that support it, fp16 (with GradScaler) on older GPUs, fp32 on
    CPUs (most CPUs have no native bf16 and run bf16 matmuls far slower than fp32)."""
    if requested not in PRECISIONS:
        raise UserError(f"training.precision: {requested!r} is not one of {PRECISIONS}")
    if device.type == "cuda":
        bf16 = torch.cuda.is_bf16_supported()
        if requested == "auto":
            return "bf16" if bf16 else "fp16"
        if requested == "bf16" and not bf16:
            raise UserError("training.precision: bf16 was requested but this GPU does not support it; use fp16 or auto")
        return requested
    if requested == "auto":
        logger.info("training.precision=auto on %s: using fp32", device)
        return "fp32"
    if requested != "fp32":
        logger.warning("training.precision=%s on CPU uses CPU autocast; it is usually slower than fp32", requested)
    return requested


def autocast_dtype(precision: str) -> torch.dtype | None:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


# ----------------------------------------------------------------------------- optimizer
def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: no weight decay on biases and LayerNorm weights."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        if parameter.ndim < 2 or "LayerNorm" in name or name.endswith(".bias"):
            no_decay.append(parameter)
        else:
            decay.append(parameter)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


AUTO_LR_BASE, AUTO_LR_WIDTH = 2e-3, 128


def resolve_learning_rate(learning_rate: float | str, hidden_size: int) -> float:
    if learning_rate == "auto":
        return AUTO_LR_BASE * AUTO_LR_WIDTH / hidden_size
    return float(learning_rate)


def build_optimizer(model: torch.nn.Module, config: TrainingConfig, device: torch.device) -> torch.optim.AdamW:
    return torch.optim.AdamW(
        parameter_groups(model, config.weight_decay),
        lr=resolve_learning_rate(config.learning_rate, model.config.hidden_size),
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
        # The fused kernel (one pass over all parameters) measured 0-7 % faster per training step
        # than the default for-each implementation in four full runs on a 2-core CPU (BENCHMARKS.md).
        fused=device.type in ("cuda", "cpu"),
    )


# ----------------------------------------------------------------------------- the loop
def epoch_batches(lengths: Sequence[int], config: TrainingConfig, epoch: int, rank: Rank = SINGLE) -> Batches:
    """This rank's micro-batches of one epoch, shuffled from (seed, epoch): identical when resumed.

    Every rank draws the same epoch order and takes every ``world_size``-th batch (a distributed
    sampler over batches): disjoint data, and the same number of batches on every rank.
    """
    generator = torch.Generator().manual_seed(mask_seed(config.seed, epoch, batch_index=0, stream=ORDER_STREAM))
    batches = batch_order(lengths, config.batch_size, generator, bucketed=config.bucketing)
    per_rank = len(batches) // rank.world_size
    if per_rank == 0:
        raise UserError(
            f"training: {len(batches)} batch(es) per epoch cannot feed {rank.world_size} data-parallel ranks; "
            "lower training.batch_size or distributed.nproc_per_node"
        )
    return batches[rank.rank :: rank.world_size][:per_rank]


StepCallback = Callable[[int, dict], None]


def train(
    model: BertForMaskedLM,
    sequences: Sequence[np.ndarray],
    token_ids: TokenIds,
    masking: MaskingConfig,
    config: TrainingConfig,
    collator: Collator,
    on_step: StepCallback | None = None,
    rank: Rank = SINGLE,
) -> TrainingResult:
    """Train ``model`` in place for ``config.max_steps`` optimizer steps.

    ``on_step(step, record)`` is called after each optimizer step with that step's history
    record; tuning uses it to evaluate and prune. Under data parallelism (``rank``, from
    :func:`bert_mlm.core.distributed.launch`) each rank trains on its shard with its own masks,
    gradients are averaged by ``DistributedDataParallel``, and only rank 0 writes checkpoints.
    """
    if not len(sequences):
        raise UserError("training: there are no training sequences (is the train split empty?)")
    if config.epochs is not None:
        batches_per_epoch = math.ceil(len(sequences) / config.batch_size)
        config = replace(
            config, max_steps=max(1, math.ceil(config.epochs * batches_per_epoch / config.gradient_accumulation_steps))
        )
    device = resolve_device(config.device)
    if device.type == "cuda" and rank.distributed:
        device = torch.device("cuda", rank.local_rank)
    precision = resolve_precision(config.precision, device)
    amp_dtype = autocast_dtype(precision)
    model.to(device)
    model.train()
    mlm: torch.nn.Module = MaskedPositionsMLM(model)
    if rank.distributed:
        mlm = DistributedDataParallel(mlm, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = build_optimizer(model, config, device)
    scheduler = get_scheduler(
        config.schedule,
        optimizer=optimizer,
        num_warmup_steps=min(config.warmup_steps, config.max_steps),
        num_training_steps=config.max_steps,
    )
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    lengths = sequence_lengths(sequences)
    collator = replace(collator, whole_word=masking.whole_word)  # tuning may switch it per trial

    step, epoch, next_batch, records, resumed_from = 0, 0, 0, [], 0
    # Dropout draws from the global generators: seed them, so that the same seed and config
    # give the same weights (a resumed run restores them from the checkpoint instead).
    seed_everything(mask_seed(config.seed, 0, 0, rank.rank, stream=DROPOUT_STREAM))
    run_dir = None
    if config.checkpoint_every or config.resume:
        fingerprint = run_fingerprint(model, sequences, masking, config, rank.world_size)
        run_dir = run_folder(config.checkpoint_dir, fingerprint)
    if config.resume:
        found = load_checkpoint(run_dir)
        if found is None:
            refuse_other_runs(config.checkpoint_dir, fingerprint)
            logger.info("training.resume: no checkpoint in %s, starting fresh", config.checkpoint_dir)
        else:
            path, state = found
            if state["step"] >= config.max_steps:
                raise UserError(
                    f"training.resume: the checkpoint {str(path)!r} already completed this run's {state['step']} "
                    f"steps (training.max_steps={config.max_steps}); nothing is left to train and no new model "
                    "version is written. Raise training.max_steps to train longer, or set training.resume=false "
                    "to train again from scratch."
                )
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            scaler.load_state_dict(state["scaler"])
            restore_rng_states(state["rng"][rank.rank])
            step, epoch, next_batch = state["step"], state["epoch"], state["next_batch"]
            records = state["history"]
            resumed_from = step
            logger.info("Resumed from %s (step %d, epoch %d)", path, step, epoch)

    accumulation = config.gradient_accumulation_steps
    batches = epoch_batches(lengths, config, epoch, rank)
    train_tokens = int(sum(r["tokens"] for r in records))
    nonfinite_streak = 0
    progress = Progress(config.max_steps, "training", unit="step", enabled=config.progress and rank.is_main, initial=step)
    try:
        while step < config.max_steps:
            # The step's time includes assembling and masking its batches: throughput is what a
            # user gets, data preparation included.
            step_start = time.perf_counter()
            # Assemble and mask the micro-batches of this optimizer step first, so that the loss
            # can be divided by the masked tokens of the whole step (token-weighted accumulation).
            micro = []
            step_masking = masking.at_step(step, config.max_steps)
            for _ in range(accumulation):
                if next_batch >= len(batches):
                    epoch, next_batch = epoch + 1, 0
                    batches = epoch_batches(lengths, config, epoch, rank)
                batch = collator.collate(sequences, batches[next_batch])
                generator = mask_generator(config.seed, epoch, next_batch, rank.rank)
                inputs, labels = mask_tokens(
                    batch["input_ids"], batch["special_tokens_mask"], token_ids.mask,
                    token_ids.replacement, step_masking, generator, batch.get("word_starts"),
                )
                micro.append((inputs, batch["attention_mask"], labels))
                next_batch += 1
            local_masked = sum(int((m[2] != -100).sum()) for m in micro)
            # DDP averages gradients over ranks; dividing by the global masked count times the
            # world size makes that average exactly token-weighted over the whole global batch.
            masked_in_step = max(int(all_reduce_sum([local_masked], rank, device)[0]), 1)
            loss_scale_factor = rank.world_size / masked_in_step
            loss_total = 0.0
            correct_total = 0
            tokens_in_step = 0
            for index, (inputs, attention_mask, labels) in enumerate(micro):
                final_micro = index == len(micro) - 1
                inputs = inputs.to(device, non_blocking=True)
                attention_mask = attention_mask.to(device, non_blocking=True)
                labels = labels.to(device, non_blocking=True)
                # Gradients are all-reduced once per optimizer step, on its last micro-batch.
                sync = nullcontext() if final_micro or not rank.distributed else mlm.no_sync()
                with sync:
                    with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                        loss_sum, correct, _ = masked_lm_loss(mlm, inputs, attention_mask, labels)
                    scaler.scale(loss_sum * loss_scale_factor).backward()
                loss_total += float(loss_sum.detach())
                correct_total += int(correct)
                tokens_in_step += int(attention_mask.sum())

            loss_total, correct_total, tokens_in_step = all_reduce_sum(
                [loss_total, correct_total, tokens_in_step], rank, device
            )
            tokens_in_step = int(tokens_in_step)
            scaler.unscale_(optimizer)  # before clipping: clip the true gradients
            if config.max_grad_norm:
                grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm))
            else:
                grad_norm = float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None]))
            gradients_finite = math.isfinite(grad_norm)
            if scaler.is_enabled():
                scaler.step(optimizer)  # skips the step itself when the fp16 gradients overflowed
            elif gradients_finite and math.isfinite(loss_total):
                optimizer.step()
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            stepped = gradients_finite and (scaler.is_enabled() or math.isfinite(loss_total))
            if stepped:
                scheduler.step()
            else:
                logger.warning("training: non-finite gradient or loss at step %d; step skipped", step + 1)
            # An fp16 gradient overflow is routine (the scaler backs off); a non-finite loss is not.
            diverged = not math.isfinite(loss_total) or (not gradients_finite and not scaler.is_enabled())
            nonfinite_streak = nonfinite_streak + 1 if diverged else 0
            if nonfinite_streak >= config.max_nonfinite_steps:
                raise NonFiniteLossError(
                    f"training: the loss was non-finite for {nonfinite_streak} consecutive steps "
                    f"(last at step {step + 1}); stopping. The last good checkpoint is kept in "
                    f"{config.checkpoint_dir!r}. Lower training.learning_rate or use fp32/bf16."
                )
            step += 1
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - step_start
            train_tokens += tokens_in_step
            record = {
                "step": step,
                "epoch": epoch,
                "loss": loss_total / masked_in_step,
                "accuracy": correct_total / masked_in_step,
                "masked_tokens": masked_in_step,
                "mask_probability": step_masking.probability,
                "tokens": tokens_in_step,
                "learning_rate": scheduler.get_last_lr()[0],
                "grad_norm": grad_norm,
                "tokens_per_second": tokens_in_step / seconds if seconds > 0 else 0.0,
                "seconds": seconds,
                "loss_scale": float(scaler.get_scale()) if scaler.is_enabled() else 1.0,
            }
            records.append(record)
            progress.update(
                1, loss=f"{record['loss']:.4f}", lr=f"{record['learning_rate']:.2e}",
                **{"tokens/s": f"{record['tokens_per_second']:,.0f}"},
            )
            due = config.checkpoint_every and (step % config.checkpoint_every == 0 or step == config.max_steps)
            if due and nonfinite_streak == 0:  # never replace a good checkpoint by a diverged state
                all_rng = gather_objects(rng_states(), rank)  # a collective: every rank takes part
                if rank.is_main:  # one writer
                    save_checkpoint(
                        run_dir,
                        step,
                        {
                            "model": model.state_dict(),
                            "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict(),
                            "scaler": scaler.state_dict(),
                            "rng": all_rng,
                            "step": step,
                            "epoch": epoch,
                            "next_batch": next_batch,
                            "history": records,
                            "config": asdict(config),
                        },
                        keep=config.keep_checkpoints,
                        fingerprint=fingerprint,
                    )
            if on_step is not None:
                on_step(step, record)
                model.train()
    finally:
        progress.close()
    model.eval()
    return TrainingResult(
        history=pd.DataFrame.from_records(records),
        train_tokens=train_tokens,
        seconds=float(sum(r["seconds"] for r in records)),
        device=str(device),
        precision=precision,
        learning_rate=resolve_learning_rate(config.learning_rate, model.config.hidden_size),
        resumed_from_step=resumed_from,
    )
