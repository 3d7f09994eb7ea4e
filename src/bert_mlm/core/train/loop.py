"""The training loop: dynamic masking, native AMP, token-weighted accumulation, checkpoints.

One optimizer step consumes ``gradient_accumulation_steps`` micro-batches. The optimizer step
itself (unscale, clip, step: ``core.model.optim``), where and in which precision the model runs
(``core.common.device``) and the checkpoint files (``core.model.checkpoints``) live apart from the loop.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch.nn.parallel import DistributedDataParallel
from transformers import BertForMaskedLM

from bert_mlm.config import MaskingConfig, TrainingConfig
from bert_mlm.core.common.curves import publish
from bert_mlm.core.common.device import autocast_dtype, resolve_device, resolve_precision
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.common.seeds import DROPOUT_STREAM, ORDER_STREAM, stream_seed
from bert_mlm.core.model.bert import MaskedPositionsMLM, check_step_memory, masked_lm_loss
from bert_mlm.core.model.checkpoints import (
    BestWeights,
    Position,
    RunCheckpoints,
    rng_states,
    run_fingerprint,
    seed_everything,
)
from bert_mlm.core.model.distributed import SINGLE, Rank, all_reduce_sum, gather_objects
from bert_mlm.core.model.masking import IGNORE_INDEX, mask_generator, mask_tokens
from bert_mlm.core.model.optim import Optimisation
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.sequences import Batches, Collator, batch_order, sequence_lengths
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """The loss stayed NaN/inf for too many consecutive steps."""


@dataclass
class TrainingResult:
    history: pd.DataFrame
    train_tokens: int
    seconds: float
    device: str
    precision: str
    learning_rate: float = 0.0
    resumed_from_step: int = 0
    kept_step: int | None = None  # training.keep_best: the step whose weights the model holds
    kept_valid_loss: float | None = None

    @property
    def tokens_per_second(self) -> float:
        return self.train_tokens / self.seconds if self.seconds > 0 else 0.0


# ----------------------------------------------------------------------------- the loop
def epoch_batches(lengths: Sequence[int], config: TrainingConfig, epoch: int, rank: Rank = SINGLE,
                  mixture=None) -> Batches:
    """This rank's micro-batches of one epoch, shuffled from (seed, epoch): identical when resumed.

    Every rank draws the same epoch order and takes every ``world_size``-th batch (a distributed
    sampler over batches): disjoint data, and the same number of batches on every rank. With a
    ``mixture`` (:class:`~bert_mlm.core.tokens.blend.MixturePlan`) the epoch is its draw of each source's
    sequences, from (seed, epoch) too.
    """
    generator = torch.Generator().manual_seed(stream_seed(config.seed, epoch, batch_index=0, stream=ORDER_STREAM))
    if mixture is not None:
        sample = mixture.sample(config.seed, epoch)
        drawn = batch_order(np.asarray(lengths)[sample], config.batch_size, generator, bucketed=config.bucketing)
        batches = Batches(sample[drawn.order], drawn.batch_size, drawn.picks)
    else:
        batches = batch_order(lengths, config.batch_size, generator, bucketed=config.bucketing)
    per_rank = len(batches) // rank.world_size
    if per_rank == 0:
        raise UserError(
            f"training: {len(batches)} batch(es) per epoch cannot feed {rank.world_size} data-parallel ranks; "
            "lower training.batch_size or distributed.nproc_per_node"
        )
    return batches[rank.rank :: rank.world_size][:per_rank]


StepCallback = Callable[[int, dict], None]
# The history's columns in the order a step's record is built; records read back from a checkpoint
# (JSON, keys sorted) would otherwise give a resumed run's history another column order.
HISTORY_COLUMNS = ("step", "epoch", "loss", "accuracy", "masked_tokens", "mask_probability", "tokens", "learning_rate",
                   "grad_norm", "tokens_per_second", "seconds", "loss_scale", "valid_loss", "valid_loss_se",
                   "valid_accuracy", "valid_masked_tokens", "valid_seconds")


def history_frame(records: list[dict]) -> pd.DataFrame:
    """The per-step history; validation columns hold NaN on the steps without one."""
    frame = pd.DataFrame.from_records(records)
    return frame[[c for c in HISTORY_COLUMNS if c in frame] + [c for c in frame if c not in HISTORY_COLUMNS]]


@dataclass
class Validation:
    """What the loop evaluates every ``training.eval_every`` optimizer steps (and at the last):
    ``evaluate``, the fixed protocol on a bounded held-out set
    (:meth:`bert_mlm.core.train.experiment.Experiment.validation`; a tuning trial's study set). Its
    results join that step's history record; its time is not training time."""

    evaluate: Callable[[BertForMaskedLM], dict]

    def run(self, model: BertForMaskedLM, device: torch.device, step: int) -> dict:
        """The validation columns of step ``step``'s record. Under a forked RNG (evaluation draws
        nothing from the global generators today; training's dropout stream must stay untouched
        whatever it does), and the model goes back to train mode."""
        started = time.perf_counter()
        cuda = [] if device.type != "cuda" else [torch.cuda.current_device() if device.index is None else device.index]
        with torch.random.fork_rng(devices=cuda):
            metrics = self.evaluate(model)
        model.train()
        seconds = time.perf_counter() - started
        logger.info("validation at step %d: loss %.4f ± %.4f, accuracy %.4f (%s masked tokens of %s valid sequences, "
                    "%.1f s)", step, metrics["eval_loss"], metrics["eval_loss_se"], metrics["eval_accuracy"],
                    f"{metrics['eval_masked_tokens']:,}", f"{metrics['eval_sequences']:,}", seconds)
        return {"valid_loss": metrics["eval_loss"], "valid_loss_se": metrics["eval_loss_se"],
                "valid_accuracy": metrics["eval_accuracy"], "valid_masked_tokens": metrics["eval_masked_tokens"],
                "valid_seconds": seconds}


def better(best: BestWeights | None, record: dict, model: BertForMaskedLM) -> BestWeights | None:
    """``best``, or the record's step when its validation loss is lower (a NaN never is)."""
    loss = record["valid_loss"]
    if not math.isfinite(loss) or (best is not None and loss >= best.valid_loss):
        return best
    weights = {name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()}
    return BestWeights(record["step"], loss, weights)


def train(
    model: BertForMaskedLM,
    sequences: Sequence[np.ndarray],
    token_ids: TokenIds,
    masking: MaskingConfig,
    config: TrainingConfig,
    collator: Collator,
    on_step: StepCallback | None = None,
    rank: Rank = SINGLE,
    validation: Validation | None = None,
) -> TrainingResult:
    """Train ``model`` in place for ``config.max_steps`` optimizer steps.

    ``on_step(step, record)`` is called after each optimizer step with that step's history
    record; tuning uses it to prune. ``validation`` (needed when ``config.eval_every`` is set)
    runs every ``config.eval_every`` steps on rank 0, before the step's checkpoint, so a resumed run
    has the same history; with ``config.keep_best`` the model ends with the weights of the step
    with the lowest validation loss. Under data parallelism (``rank``, from
    :func:`bert_mlm.core.model.distributed.launch`) each rank trains on its shard with its own masks,
    gradients are averaged by ``DistributedDataParallel``, and only rank 0 writes checkpoints.
    """
    if not len(sequences):
        raise UserError("training: there are no training sequences (is the train split empty?)")
    if collator.whole_word != masking.whole_word:  # whole-word masking needs the batches' word starts
        raise ValueError(f"train: the collator's whole_word={collator.whole_word} differs from "
                         f"masking.whole_word={masking.whole_word}; build the collator from the masking it trains")
    if config.eval_every and validation is None:
        raise ValueError("train: training.eval_every is set but no validation was given")
    mixture = getattr(sequences, "mixture", None)
    config = with_step_budget(config, mixture.epoch_size if mixture is not None else len(sequences))
    device = resolve_device(config.device)
    if device.type == "cuda" and rank.distributed:
        device = torch.device("cuda", rank.local_rank)
    precision = resolve_precision(config.precision, device)
    model.to(device)
    model.train()
    if config.compile:
        compile_encoder(model, config.compile, device)
    mlm: torch.nn.Module = MaskedPositionsMLM(model)
    if rank.distributed:
        mlm = DistributedDataParallel(mlm, device_ids=[device.index] if device.type == "cuda" else None)
    optimisation = Optimisation.build(model, config, device, precision)
    stateful = {"model": model, **optimisation.stateful}
    lengths = sequence_lengths(sequences)
    check_step_memory(model.config, config.batch_size, int(max(lengths)), device, precision, processes=1,
                      sequences=len(sequences))
    # Dropout draws from the global generators: seed them, so that the same seed and config
    # give the same weights (a resumed run restores them from the checkpoint instead).
    seed_everything(stream_seed(config.seed, 0, 0, rank.rank, stream=DROPOUT_STREAM))
    checkpoints = None
    if config.checkpoint_every or config.resume:
        fingerprint = run_fingerprint(model, sequences, masking, config, rank.world_size, precision)
        checkpoints = RunCheckpoints(
            config.checkpoint_dir, fingerprint, config.checkpoint_every, config.keep_checkpoints
        )
    position = checkpoints.resume(stateful, rank.rank, config.max_steps) if config.resume else Position()
    resumed_from = position.step
    batches = epoch_batches(lengths, config, position.epoch, rank, mixture)
    train_tokens = int(sum(r["tokens"] for r in position.records))
    nonfinite_streak = 0
    # One rate, in tokens/s, over the last records' window and since this run started (a per-window
    # rate beside a cumulative steps/s read as one number jumping 10x between lines).
    progress = Progress(config.max_steps, "training", unit="step", enabled=config.progress and rank.is_main,
                        initial=position.step, speed=False)
    run_tokens = run_seconds = 0.0
    pending: list[dict] = []  # steps whose device values the host has not read yet
    record_every = config.record_window(device)
    window_start = time.perf_counter()
    try:
        while position.step < config.max_steps:
            step_masking = masking.at_step(position.step, config.max_steps)
            micro = []
            for _ in range(config.gradient_accumulation_steps):
                if position.next_batch >= len(batches):
                    position.epoch, position.next_batch = position.epoch + 1, 0
                    batches = epoch_batches(lengths, config, position.epoch, rank, mixture)
                micro.append(masked_batch(sequences, batches[position.next_batch], collator, token_ids, step_masking,
                                          mask_generator(config.seed, position.epoch, position.next_batch, rank.rank)))
                position.next_batch += 1
            loss, correct, tokens, masked = accumulate_gradients(mlm, micro, optimisation.scaler,
                                                                 autocast_dtype(precision), device, rank)
            grad_norm, diverged = optimisation.step(model, loss, position.step)
            position.step += 1
            pending.append({
                "step": position.step, "epoch": position.epoch, "loss": loss, "accuracy": correct,
                "masked_tokens": masked, "mask_probability": step_masking.probability, "tokens": tokens,
                "learning_rate": optimisation.learning_rate, "grad_norm": grad_norm, "diverged": diverged,
                "loss_scale": optimisation.loss_scale_tensor(),
            })
            checkpoint_due = bool(checkpoints and checkpoints.due(position.step, config.max_steps))
            validation_due = bool(config.eval_every) and (position.step % config.eval_every == 0
                                                          or position.step == config.max_steps)
            if not (on_step is not None or checkpoint_due or validation_due or position.step % record_every == 0
                    or position.step == config.max_steps):
                continue
            # A record is due: the one host sync of the window. Its wall time (batch assembly and
            # masking included: throughput is what a user gets) is shared by its steps by tokens.
            records = read_records(pending, device)
            now = time.perf_counter()
            window_tokens = max(sum(r["tokens"] for r in records), 1)
            for record in records:
                seconds = (now - window_start) * record["tokens"] / window_tokens
                scale = record.pop("loss_scale")
                record.update(tokens_per_second=record["tokens"] / seconds if seconds > 0 else 0.0, seconds=seconds,
                              loss_scale=scale)
                diverged = record.pop("diverged")
                if diverged:
                    logger.warning("training: non-finite gradient or loss at step %d; step skipped", record["step"])
                nonfinite_streak = nonfinite_streak + 1 if diverged else 0
                if nonfinite_streak >= config.max_nonfinite_steps:
                    raise NonFiniteLossError(
                        f"training: the loss was non-finite for {nonfinite_streak} consecutive steps "
                        f"(last at step {record['step']}); stopping. The last good checkpoint is kept in "
                        f"{config.checkpoint_dir!r}. Lower training.learning_rate or use fp32/bf16."
                    )
            pending, window_start = [], now
            train_tokens += sum(r["tokens"] for r in records)
            position.records.extend(records)
            last = records[-1]
            window_tokens, window_seconds = sum(r["tokens"] for r in records), sum(r["seconds"] for r in records)
            run_tokens, run_seconds = run_tokens + window_tokens, run_seconds + window_seconds
            progress.update(len(records), seconds=window_seconds, loss=f"{last['loss']:.4f}",
                            lr=f"{last['learning_rate']:.2e}",
                            **{"tokens/s (window)": f"{window_tokens / max(window_seconds, 1e-9):,.0f}",
                               "tokens/s (since start)": f"{run_tokens / max(run_seconds, 1e-9):,.0f}"})
            if validation_due:
                if rank.is_main:  # the other ranks wait for it at their next collective
                    last.update(validation.run(model, device, position.step))
                    position.best = better(position.best, last, model) if config.keep_best else None
                window_start = time.perf_counter()  # validation time is not training time
            if rank.is_main:  # after the validation: a validated step's record carries its valid_loss
                publish(records)  # live curves (TensorBoard) while the run goes
            # Never replace a good checkpoint by a diverged state.
            if checkpoint_due and nonfinite_streak == 0:
                rng = gather_objects(rng_states(), rank)  # a collective: every rank takes part
                if rank.is_main:  # one writer
                    checkpoints.save(position, stateful, rng, config.model_dump())
            if on_step is not None:
                on_step(position.step, last)
                model.train()
                window_start = time.perf_counter()  # the callback's time is not training time
    finally:
        progress.close()
    kept = position.best if config.keep_best and rank.is_main else None
    if kept is not None:
        if kept.step != position.step:
            model.load_state_dict(kept.weights)
        logger.info("training.keep_best: the model kept is step %d's, the lowest validation loss (%.4f); the last "
                    "step, %d, had %.4f", kept.step, kept.valid_loss, position.step,
                    position.records[-1].get("valid_loss", float("nan")))
    model.eval()
    return TrainingResult(
        history=history_frame(position.records),
        train_tokens=train_tokens,
        seconds=float(sum(r["seconds"] for r in position.records)),
        device=str(device),
        precision=precision,
        learning_rate=config.peak_learning_rate(model.config.hidden_size),
        resumed_from_step=resumed_from,
        kept_step=kept.step if kept is not None else None,
        kept_valid_loss=kept.valid_loss if kept is not None else None,
    )


def compile_encoder(model: BertForMaskedLM, setting: bool | str, device: torch.device) -> None:
    """``model.bert`` under ``torch.compile``, in place (``nn.Module.compile``): the module tree,
    ``state_dict`` keys (no ``_orig_mod.``), checkpoints, ``save_pretrained`` and DDP see the
    plain model. Only the encoder: the number of masked positions, which varies every step, never
    enters the compiled graph (the head and the loss run eagerly on the gathered positions), so it
    causes no recompiles; a varying sequence width (dynamic padding) turns dynamic after its first
    recompile (torch's automatic dynamic shapes). Refused in one line where torch.compile cannot
    work (no C compiler, an unsupported platform or Python): a run that asked for compile is not
    silently run eagerly."""
    mode = None if setting is True else setting
    try:
        # A tiny function compiled for the device first: compile errors surface at the first call,
        # which would otherwise be deep inside the first training step.
        torch.compile(lambda x: torch.nn.functional.gelu(x) * 2, mode=mode)(torch.ones(8, device=device))
    except Exception as error:  # noqa: BLE001 - any backend failure means: compile unavailable here
        reason = (str(error).strip().splitlines() or [""])[0][:200]
        raise UserError(f"training.compile: torch.compile is unavailable on {device} here ({type(error).__name__}: "
                        f"{reason}); set training.compile=false") from error
    model.bert.compile(mode=mode)
    logger.info("training.compile=%s: the encoder runs under torch.compile (mode %s)", setting, mode or "default")


def with_step_budget(config: TrainingConfig, sequences: int) -> TrainingConfig:
    """``training.epochs`` turned into ``max_steps`` (passes over the training sequences)."""
    if config.epochs is None:
        return config
    return config.replace(max_steps=config.step_budget(sequences))



def read_records(pending: list[dict], device: torch.device) -> list[dict]:
    """The pending steps' device values (loss and correct sums, gradient norm, divergence flag,
    loss scale) read to the host in one transfer: the window's only sync with the device."""
    fields = ("loss", "accuracy", "grad_norm", "diverged", "loss_scale")
    # float32: every value is a float32 (or exact small integer) already, so nothing is rounded.
    values = torch.stack([torch.as_tensor(r[f], dtype=torch.float32, device=device).reshape(())
                          for r in pending for f in fields]).tolist()
    records = []
    for index, record in enumerate(pending):
        loss, correct, grad_norm, diverged, scale = values[index * len(fields):(index + 1) * len(fields)]
        records.append({**record, "loss": loss / record["masked_tokens"], "accuracy": correct / record["masked_tokens"],
                        "grad_norm": grad_norm, "diverged": bool(diverged), "loss_scale": scale})
    return records


def masked_batch(sequences, indices, collator: Collator, token_ids: TokenIds, masking: MaskingConfig,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One micro-batch, padded and masked: (inputs, attention mask, labels)."""
    batch = collator.collate(sequences, indices)
    inputs, labels = mask_tokens(batch["input_ids"], batch["special_tokens_mask"], token_ids.mask,
                                 token_ids.replacement, masking, generator, batch.get("word_starts"))
    return inputs, batch["attention_mask"], labels


def accumulate_gradients(mlm: torch.nn.Module, micro: list, scaler: torch.amp.GradScaler, amp_dtype: torch.dtype | None,
                         device: torch.device, rank: Rank) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Backward over one optimizer step's micro-batches, token-weighted: the loss is divided by
    the masked tokens of the whole (global) step. Returns the step's summed loss and correct
    predictions (0-d device tensors), tokens and masked tokens, over all ranks."""
    # The batches are still on the host here: counting their masked and real tokens is no sync.
    local_masked = sum(int((labels != IGNORE_INDEX).sum()) for _, _, labels in micro)
    local_tokens = sum(int(attention_mask.sum()) for _, attention_mask, _ in micro)
    # DDP averages gradients over ranks; dividing by the global masked count times the
    # world size makes that average exactly token-weighted over the whole global batch.
    masked, tokens = (int(count) for count in all_reduce_sum([local_masked, local_tokens], rank, device))
    masked = max(masked, 1)
    loss_scale_factor = rank.world_size / masked
    loss_total = correct_total = torch.zeros((), device=device)
    for index, (inputs, attention_mask, labels) in enumerate(micro):
        inputs = inputs.to(device, non_blocking=True)
        attention_mask = attention_mask.to(device, non_blocking=True)
        positions = (labels.flatten() != IGNORE_INDEX).nonzero().squeeze(1).to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        # Gradients are all-reduced once per optimizer step, on its last micro-batch.
        final_micro = index == len(micro) - 1
        with nullcontext() if final_micro or not rank.distributed else mlm.no_sync():
            with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                loss_sum, correct, _ = masked_lm_loss(mlm, inputs, attention_mask, labels, positions)
            scaler.scale(loss_sum * loss_scale_factor).backward()
        # Device tensors, read by the host only when a record is due (train's read_records).
        loss_total = loss_total + loss_sum.detach().float()
        correct_total = correct_total + correct
    if rank.distributed:
        summed = torch.stack([loss_total, correct_total.float()])
        torch.distributed.all_reduce(summed)  # enqueued on the device: no host sync
        loss_total, correct_total = summed[0], summed[1]
    return loss_total, correct_total, tokens, masked
