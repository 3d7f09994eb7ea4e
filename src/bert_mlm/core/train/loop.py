"""The training loop: dynamic masking, native AMP, token-weighted accumulation, checkpoints.

One optimizer step takes ``gradient_accumulation_steps`` micro-batches. The optimizer step
(``core.model.optim``), the device and precision (``core.common.device``), the checkpoints
(``core.model.checkpoints``) and the step records (``core.train.records``) live apart.
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
from bert_mlm.core.common.device import autocast, autocast_dtype, resolve_device, resolve_precision
from bert_mlm.core.common.seeds import DROPOUT_STREAM, ORDER_STREAM, stream_seed
from bert_mlm.core.evaluate.result import HeldOut
from bert_mlm.core.model.bert import MaskedPositionsMLM, check_step_memory, masked_lm_loss
from bert_mlm.core.model.checkpoints import cpu_weights, rng_states, seed_everything
from bert_mlm.core.model.distributed import SINGLE, Rank, all_reduce_sum, gather_objects
from bert_mlm.core.model.masking import IGNORE_INDEX, mask_generator, mask_tokens
from bert_mlm.core.model.optim import Optimisation
from bert_mlm.core.model.resume import BestWeights, Position, RunCheckpoints, run_fingerprint
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.batches import Batches, batch_order
from bert_mlm.core.tokens.sequences import Collator, sequence_lengths
from bert_mlm.core.train.records import RecordWindow, StepRecord, history_frame
from bert_mlm.errors import UserError, first_line

logger = logging.getLogger(__name__)


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

    Every rank draws the same order and takes every ``world_size``-th batch: disjoint data, as many
    batches on every rank. A ``mixture`` (:class:`~bert_mlm.core.tokens.blend.MixturePlan`) draws
    the epoch's sequences of each source, from (seed, epoch) too.
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
        raise UserError(f"training: {len(batches)} batch(es) per epoch cannot feed {rank.world_size} data-parallel "
                        "ranks; lower training.batch_size or distributed.nproc_per_node")
    return batches[rank.rank :: rank.world_size][:per_rank]


StepCallback = Callable[[int, dict], None]


# What the loop evaluates every ``training.eval_every`` optimizer steps (and at the last): the fixed
# protocol on a bounded held-out set (Experiment.validation; a tuning trial's study set).
Validation = Callable[[BertForMaskedLM], HeldOut]


def validation_due(step: int, last: int | None, every: int) -> bool:
    """Whether ``step`` validates: every ``every`` steps (0: never) and at the ``last``."""
    return bool(every) and (step % every == 0 or step == last)


def validation_count(steps: int, every: int) -> int:
    """How many of a run's ``steps`` :func:`validation_due` says yes to."""
    return steps // every + bool(steps % every) if every else 0


def validate(evaluate: Validation, model: BertForMaskedLM, device: torch.device, record: StepRecord) -> None:
    """Fills the validation columns of ``record``; its time is not training time. Under a forked RNG
    (evaluation draws nothing from the global generators today; training's dropout stream must stay
    untouched whatever it does), and the model goes back to train mode."""
    started = time.perf_counter()
    cuda = [] if device.type != "cuda" else [torch.cuda.current_device() if device.index is None else device.index]
    with torch.random.fork_rng(devices=cuda):
        scores = evaluate(model)
    model.train()
    record.valid_seconds = seconds = time.perf_counter() - started
    record.valid_loss, record.valid_loss_se, record.valid_accuracy = scores.loss, scores.loss_se, scores.accuracy
    record.valid_masked_tokens, record.valid_frequent_share = scores.masked_tokens, scores.frequent_share
    record.valid_baseline_accuracy = scores.baseline_accuracy
    logger.info("validation at step %d: loss %.4f ± %.4f, accuracy %.4f (%s masked tokens of %s valid sequences, "
                "%.1f s)%s", record.step, scores.loss, scores.loss_se, scores.accuracy, f"{scores.masked_tokens:,}",
                f"{scores.sequences:,}", seconds, "" if (standing := scores.standing()) is None else f"; {standing}")


def better(best: BestWeights | None, record: StepRecord, model: BertForMaskedLM) -> BestWeights | None:
    """``best``, or the record's step when its validation loss is lower (a NaN never is)."""
    loss = record.valid_loss
    if not math.isfinite(loss) or (best is not None and loss >= best.valid_loss):
        return best
    return BestWeights(record.step, loss, cpu_weights(model))


def train(model: BertForMaskedLM, sequences: Sequence[np.ndarray], token_ids: TokenIds, masking: MaskingConfig,
          config: TrainingConfig, collator: Collator, on_step: StepCallback | None = None, rank: Rank = SINGLE,
          validation: Validation | None = None) -> TrainingResult:
    """Train ``model`` in place for ``config.max_steps`` optimizer steps.

    ``on_step(step, record)`` gets each step's history record (tuning prunes by it). ``validation``
    runs every ``config.eval_every`` steps on rank 0, before the step's checkpoint (so a resumed run
    has the same history); ``config.keep_best`` ends with the best validated step's weights. Under
    data parallelism (``rank``) each rank trains on its shard with its own masks, DDP averages the
    gradients, and rank 0 alone writes checkpoints.
    """
    run = TrainingRun(model, sequences, token_ids, masking, config, collator, rank, validation)
    config, position, optimisation = run.config, run.position, run.optimisation
    window = RecordWindow(config, run.device, rank, position.step)
    try:
        while position.step < config.max_steps:
            # Data: this step's micro-batches, masked as the masking schedule says at this step.
            step_masking = masking.at_step(position.step, config.max_steps)
            micro = run.micro_batches(step_masking)
            # Forward and backward, token-weighted over micro-batches and ranks; the optimizer step.
            loss, correct, tokens, masked = accumulate_gradients(run.mlm, micro, optimisation.scaler,
                                                                 autocast_dtype(run.precision), run.device, rank)
            grad_norm, diverged = optimisation.step(model, loss, position.step)
            position.step += 1
            window.add(StepRecord(step=position.step, epoch=position.epoch, masked_tokens=masked,
                                  mask_probability=step_masking.probability, tokens=tokens,
                                  learning_rate=optimisation.learning_rate),
                       (loss, correct, grad_norm, diverged, optimisation.loss_scale_tensor()))
            # Due now? A validation, a checkpoint, the caller's callback or the window's end needs the records.
            validating = validation_due(position.step, config.max_steps, config.eval_every)
            checkpoint_due = bool(run.checkpoints and run.checkpoints.due(position.step, config.max_steps))
            if not (validating or checkpoint_due or on_step is not None or window.due(position.step)):
                continue
            # Record: the window's one host read (rates, non-finite streak, progress).
            records = window.read()
            # Validate on rank 0 (the other ranks wait for it at their next collective).
            if validating:
                if rank.is_main:
                    validate(validation, model, run.device, records[-1])
                    position.best = better(position.best, records[-1], model) if config.keep_best else None
                window.restart()  # validation time is not training time
            # Publish: into the history (a validated step's row with its valid_loss) and the live curves.
            rows = window.publish(records, position.records)
            # Checkpoint, never replacing a good one by a diverged state.
            if checkpoint_due and window.nonfinite_streak == 0:
                run.save_checkpoint()
            # The caller's callback (tuning prunes here).
            if on_step is not None:
                on_step(position.step, rows[-1])
                model.train()
                window.restart()  # the callback's time is not training time
    finally:
        window.close()
    return run.result()


class TrainingRun:
    """One call of :func:`train`, set up: the inputs checked, the model on its device (compiled, and
    wrapped for data parallelism), its optimisation, the generators seeded, the checkpoints and the
    position (a checkpoint's with ``training.resume``), and this rank's batches of its epoch."""

    def __init__(self, model: BertForMaskedLM, sequences: Sequence[np.ndarray], token_ids: TokenIds,
                 masking: MaskingConfig, config: TrainingConfig, collator: Collator, rank: Rank,
                 validation: Validation | None) -> None:
        if not len(sequences):
            raise UserError("training: there are no training sequences (is the train split empty?)")
        if collator.whole_word != masking.words:  # whole-word and span masking need the batches' word starts
            raise ValueError(f"train: the collator's whole_word={collator.whole_word} differs from the masking's "
                             f"need of words ({masking.words}); build the collator from the masking it trains")
        if config.eval_every and validation is None:
            raise ValueError("train: training.eval_every is set but no validation was given")
        self.model, self.sequences, self.token_ids, self.collator = model, sequences, token_ids, collator
        self.rank, self.mixture = rank, getattr(sequences, "mixture", None)
        epoch_size = self.mixture.epoch_size if self.mixture is not None else len(sequences)
        # training.epochs turned into max_steps (passes over the training sequences).
        self.config = config = config if config.epochs is None else config.replace(
            max_steps=config.step_budget(epoch_size))
        device = resolve_device(config.device)
        if device.type == "cuda" and rank.distributed:
            device = torch.device("cuda", rank.local_rank)
        self.device, self.precision = device, resolve_precision(config.precision, device)
        model.to(device)
        model.train()
        if config.compile:
            compile_encoder(model, config.compile, device)
        self.mlm: torch.nn.Module = MaskedPositionsMLM(model)
        if rank.distributed:
            self.mlm = DistributedDataParallel(self.mlm, device_ids=[device.index] if device.type == "cuda" else None)
        self.optimisation = Optimisation.build(model, config, device, self.precision)
        self.stateful = {"model": model, **self.optimisation.stateful}
        self.lengths = sequence_lengths(sequences)
        check_step_memory(model.config, config.batch_size, int(max(self.lengths)), device, self.precision,
                          processes=1, sequences=len(sequences))
        # Dropout draws from the global generators: seed them, so that the same seed and config
        # give the same weights (a resumed run restores them from the checkpoint instead).
        seed_everything(stream_seed(config.seed, 0, 0, rank.rank, stream=DROPOUT_STREAM))
        self.checkpoints = None
        if config.checkpoint_every or config.resume:
            fingerprint = run_fingerprint(model, sequences, masking, config, rank.world_size, self.precision)
            self.checkpoints = RunCheckpoints(config.checkpoint_dir, fingerprint, config.checkpoint_every,
                                              config.keep_checkpoints)
        self.position = self.checkpoints.resume(self.stateful, rank.rank, config.max_steps) if config.resume \
            else Position()
        self.resumed_from = self.position.step
        self.batches = epoch_batches(self.lengths, config, self.position.epoch, rank, self.mixture)

    def micro_batches(self, masking: MaskingConfig) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The next optimizer step's micro-batches, masked with ``masking``: the position moves on,
        into the next epoch where this one ends. Each batch's masks are drawn from (seed, epoch,
        batch, rank) alone, so a resumed run draws the same."""
        position, config, micro = self.position, self.config, []
        for _ in range(config.gradient_accumulation_steps):
            if position.next_batch >= len(self.batches):
                position.epoch, position.next_batch = position.epoch + 1, 0
                self.batches = epoch_batches(self.lengths, config, position.epoch, self.rank, self.mixture)
            generator = mask_generator(config.seed, position.epoch, position.next_batch, self.rank.rank)
            micro.append(masked_batch(self.sequences, self.batches[position.next_batch], self.collator, self.token_ids,
                                      masking, generator))
            position.next_batch += 1
        return micro

    def save_checkpoint(self) -> None:
        rng = gather_objects(rng_states(), self.rank)  # a collective: every rank takes part
        if self.rank.is_main:  # one writer
            self.checkpoints.save(self.position, self.stateful, rng, self.config.model_dump())

    def result(self) -> TrainingResult:
        """The run's result; with ``training.keep_best`` (rank 0) the model holds the best validated
        step's weights. The model is left in eval mode."""
        position, model, config = self.position, self.model, self.config
        kept = position.best if config.keep_best and self.rank.is_main else None
        if kept is not None:
            if kept.step != position.step:
                model.load_state_dict(kept.weights)
            logger.info("training.keep_best: the model kept is step %d's, the lowest validation loss (%.4f); the "
                        "last step, %d, had %.4f", kept.step, kept.valid_loss, position.step,
                        position.records[-1].get("valid_loss", float("nan")))
        model.eval()
        return TrainingResult(history=history_frame(position.records),
                              train_tokens=int(sum(r["tokens"] for r in position.records)),
                              seconds=float(sum(r["seconds"] for r in position.records)), device=str(self.device),
                              precision=self.precision,
                              learning_rate=config.peak_learning_rate(model.config.hidden_size),
                              resumed_from_step=self.resumed_from, kept_step=kept.step if kept is not None else None,
                              kept_valid_loss=kept.valid_loss if kept is not None else None)


def compile_encoder(model: BertForMaskedLM, setting: bool | str, device: torch.device) -> None:
    """``model.bert`` under ``torch.compile``, in place (``nn.Module.compile``: ``state_dict`` keys,
    checkpoints and DDP see the plain model). Only the encoder: the number of masked positions,
    which varies every step, stays out of the graph (no recompiles); a varying sequence width (dynamic
    padding) turns dynamic after its first recompile. Refused in one line where
    torch.compile cannot work (no C compiler, say): a run that asked for it never runs eagerly."""
    mode = None if setting is True else setting
    try:
        # A tiny function compiled for the device first: compile errors surface at the first call,
        # which would otherwise be deep inside the first training step.
        torch.compile(lambda x: torch.nn.functional.gelu(x) * 2, mode=mode)(torch.ones(8, device=device))
    except Exception as error:  # noqa: BLE001 - any backend failure means: compile unavailable here
        raise UserError(f"training.compile: torch.compile is unavailable on {device} here ({type(error).__name__}: "
                        f"{first_line(error)}); set training.compile=false") from error
    model.bert.compile(mode=mode)
    logger.info("training.compile=%s: the encoder runs under torch.compile (mode %s)", setting, mode or "default")



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
            with autocast(device, amp_dtype):
                loss_sum, correct, _ = masked_lm_loss(mlm, inputs, attention_mask, labels, positions)
            scaler.scale(loss_sum * loss_scale_factor).backward()
        # Device tensors, read by the host only when a record is due (RecordWindow.read).
        loss_total = loss_total + loss_sum.detach().float()
        correct_total = correct_total + correct
    if rank.distributed:
        summed = torch.stack([loss_total, correct_total.float()])
        torch.distributed.all_reduce(summed)  # enqueued on the device: no host sync
        loss_total, correct_total = summed[0], summed[1]
    return loss_total, correct_total, tokens, masked
