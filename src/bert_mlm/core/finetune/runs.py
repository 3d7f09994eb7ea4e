"""Fine-tuning evaluation: did pretraining help the user's task?

The pretrained encoder is fine-tuned on a labelled task, ``finetune.seeds`` times, and so is each
of its baselines (:func:`starting_points`) with the same seeds, head, batch order and tokenizer:
"pretraining gained +x.x accuracy points [95 % CI lo, hi]". This is how the literature judges
pretraining (Gururangan et al. 2020; Wettig et al. 2023): masked-LM loss can rank choices the wrong
way, and a frozen probe of a small encoder cannot tell a trained one from a random one
(``mode: frozen`` keeps that cheap check).

One runner for every task kind: a task prepared for its kind (:class:`~.classifier.PreparedTask`,
:class:`~.tagger.PreparedTagging`) says how its model is made, batched, scored and reported; the
rest (schedule, optimiser step, epochs, early stopping, pairing) is the same for both.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from bert_mlm.config import FinetuneConfig, ModelConfig, TrainingConfig
from bert_mlm.core.common.device import autocast, autocast_dtype, resolve_device, resolve_precision
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.finetune.alignment import IGNORED
from bert_mlm.core.finetune.classifier import PreparedTask
from bert_mlm.core.finetune.labelled import Task, load_task
from bert_mlm.core.finetune.result import BASELINE, PRETRAINED, FinetuneRuns, ModelScores, RunRow, file_name
from bert_mlm.core.finetune.tagged import TaggedTask, load_tagged_task, task_kind
from bert_mlm.core.finetune.tagger import PreparedTagging
from bert_mlm.core.model.bert import build_model, load_for_continued_pretraining
from bert_mlm.core.model.checkpoints import seed_everything
from bert_mlm.core.model.optim import Optimisation
from bert_mlm.core.train.loop import epoch_batches
from bert_mlm.core.train.records import NonFiniteLossError
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

Prepared = PreparedTask | PreparedTagging
BatchCallback = Callable[[str, int, int, np.ndarray], None]  # (model name, seed, epoch, example indices)
MAX_NONFINITE_STEPS = 5


def load_labelled(config: FinetuneConfig, name: str = "") -> Task | TaggedTask:
    """Read and check a task of either kind (``finetune.task``; auto: decided from the file, the
    decision logged with its reason), every user error one line naming the file (and the task
    ``name``): the hook runs it before any model trains, the node before it fine-tunes."""
    where = f"finetune.tasks.{name}" if name else "finetune"
    try:
        kind = task_kind(config)
        logger.info("%s: a %s task: %s", where, kind.kind, kind.reason)
        if kind.kind == "token":
            task = load_tagged_task(config)
            for note in task.notes:
                logger.info("%s: %s", where, note)
            return task
        if config.save_model and config.pooling != "cls":
            raise UserError("finetune.save_model: a kept classifier must work in plain transformers, whose "
                            "AutoModelForSequenceClassification reads the pooled [CLS] state; set finetune.pooling=cls "
                            "(a tagger pools nothing: a token task keeps any pooling)")
        return load_task(config)
    except UserError as error:
        if not name:
            raise
        raise UserError(f"{where}: {error}") from error


def prepare_task(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase, max_positions: int,
                 name: str = "") -> Prepared:
    """``config``'s task read, checked and encoded for its kind with the tokenizer every compared model shares."""
    task = load_labelled(config, name)
    max_length = min(config.max_length, max_positions)
    return PreparedTagging.build(task, tokenizer, max_length, config.label_all_pieces) \
        if isinstance(task, TaggedTask) else PreparedTask.build(task, tokenizer, max_length, config.pooling)


@dataclass
class RunOutcome:
    """One fine-tuning run: eval predictions of the reported epoch (a label per eval example, or
    per eval word), a row per epoch, and the fine-tuned model (only when it is to be kept)."""

    predictions: np.ndarray
    history: list[RunRow]
    model: PreTrainedModel | None = None


@dataclass
class _Fit:
    """One run's model and optimiser, and what carries across its epochs: the step, the streak of
    non-finite steps, and the digest of every batch's example indices (``data_order``)."""

    model: PreTrainedModel
    schedule: TrainingConfig  # the run's steps, batch size, learning rate and seed
    optimisation: Optimisation
    name: str
    step: int = 0
    nonfinite: int = 0
    order: hashlib.blake2b = field(default_factory=lambda: hashlib.blake2b(digest_size=8))


@dataclass
class Runner:
    """Where and how the runs go: the prepared task, the configuration, device and precision."""

    prepared: Prepared
    config: FinetuneConfig
    device: torch.device
    precision: str
    on_batch: BatchCallback | None = None
    progress: Progress = field(default_factory=lambda: Progress(None, "", enabled=False))

    @classmethod
    def create(cls, prepared: Prepared, config: FinetuneConfig, device: str = "auto", precision: str = "auto",
               **kwargs) -> Runner:
        resolved = resolve_device(device)
        return cls(prepared, config, resolved, resolve_precision(precision, resolved), **kwargs)

    def run(self, encoder: PreTrainedModel, name: str, seed: int, keep_model: bool = False) -> RunOutcome:
        """Fine-tune a model of ``encoder`` with ``seed`` (``finetune.mode: frozen``: the probe head alone)."""
        config, prepared, device = self.config, self.prepared, self.device
        amp_dtype, started = autocast_dtype(self.precision), time.perf_counter()
        model = prepared.model(encoder, seed).to(device)
        epochs, patience, best_state = config.epochs * (config.mode == "full"), config.early_stopping_patience, None
        rows: list[tuple[RunRow, np.ndarray]] = []  # each epoch's row and its eval predictions
        if config.head_init == "probe" or config.mode == "frozen":
            prepared.fit_head(model, device, amp_dtype, seed)
            # Epoch 0: the linear probe alone, before any weight of the encoder moves (frozen: the result, epoch 1).
            rows.append(self._row(model, name, seed, int(config.mode == "frozen"), math.nan, math.nan, "", started))
        if epochs:
            schedule = self._schedule(model, seed)
            fit = _Fit(model, schedule, Optimisation.build(model, schedule, device, self.precision), name)
            seed_everything(seed)  # dropout: the same stream for the pretrained model and its baselines
        for epoch in range(epochs):
            started = time.perf_counter()
            train_loss = self._epoch(fit, epoch)
            rows.append(self._row(model, name, seed, epoch + 1, train_loss, fit.optimisation.learning_rate,
                                  fit.order.hexdigest(), started))
            row = rows[-1][0]
            # The ETA from the finished epochs' own time.
            self.progress.update(1, seconds=row.seconds, model=name, seed=seed, **{prepared.metric: f"{row.score:.4f}"})
            best = max((tuned for tuned, _ in rows if tuned.epoch > 0), key=lambda tuned: tuned.score)  # the first best
            if patience and keep_model and best is row:
                best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            if patience and row.epoch - best.epoch >= patience:  # epochs without a better one
                self.progress.update(epochs - epoch - 1, seconds=0.0)
                break
        if not epochs:
            self.progress.update(config.epochs, seconds=rows[-1][0].seconds, model=name, seed=seed)
        # Early stopping reports the best fine-tuned epoch (its weights when kept); otherwise the last.
        tuned = [(row, predictions) for row, predictions in rows if row.epoch > 0]
        reported, predictions = max(tuned, key=lambda pair: pair[0].score) if patience else tuned[-1]
        for row, _ in rows:
            row.reported = row is reported
        if best_state is not None:
            model.load_state_dict(best_state)
        return RunOutcome(predictions, [row for row, _ in rows], model.to("cpu") if keep_model else None)

    def _row(self, model: PreTrainedModel, name: str, seed: int, epoch: int, train_loss: float, learning_rate: float,
             order: str, started: float) -> tuple[RunRow, np.ndarray]:
        """The eval predictions after ``epoch`` and its ``finetune_runs`` row."""
        predictions = self.prepared.predict(model, self.device, autocast_dtype(self.precision))
        return RunRow(name, seed, epoch, train_loss, self.prepared.scores(predictions), learning_rate,
                      time.perf_counter() - started, order), predictions

    def _schedule(self, model: PreTrainedModel, seed: int) -> TrainingConfig:
        """The run as the training loop's configuration, so that it takes the project's optimizer
        step and its epoch order (batches shuffled from (seed, epoch) alone: every model fine-tuned
        with this seed sees the same batches in the same order); configured as BERT fine-tuning usually is."""
        config = self.config
        total = config.epochs * math.ceil(len(self.prepared.train) / config.batch_size)
        return TrainingConfig(max_steps=total, batch_size=config.batch_size,
                              learning_rate=config.learning_rate_for(model.config.hidden_size),
                              weight_decay=config.weight_decay, adam_beta2=0.999, adam_epsilon=1e-8, schedule="linear",
                              warmup_steps=round(config.warmup_ratio * total), seed=seed, precision=self.precision,
                              progress=False)

    def _epoch(self, fit: _Fit, epoch: int) -> float:
        """One pass over the training examples in (seed, epoch)'s batch order; the mean loss per
        labelled unit (example, or a token task's labelled piece)."""
        prepared, device, amp_dtype = self.prepared, self.device, autocast_dtype(self.precision)
        fit.model.train()
        loss_sum, labelled = 0.0, 0
        for indices in epoch_batches(prepared.train.lengths, fit.schedule, epoch):
            fit.order.update(np.ascontiguousarray(indices, dtype=np.int64).tobytes())
            if self.on_batch is not None:
                self.on_batch(fit.name, fit.schedule.seed, epoch, indices)
            batch = {k: v.to(device, non_blocking=True) for k, v in prepared.batch(indices).items()}
            labels = batch.pop("labels")
            with autocast(device, amp_dtype):
                logits = prepared.logits(fit.model, batch)
            # (examples, classes) or (sentences, pieces, labels): one row per labelled unit either way.
            loss = F.cross_entropy(logits.float().flatten(0, -2), labels.flatten(), ignore_index=IGNORED)
            fit.optimisation.scaler.scale(loss).backward()
            loss = loss.detach()
            value, units = float(loss), int((labels != IGNORED).sum())  # fine-tuning's batches are small
            _, diverged = fit.optimisation.step(fit.model, loss, fit.step)
            fit.step += 1
            fit.nonfinite = fit.nonfinite + 1 if bool(diverged) else 0
            if fit.nonfinite >= MAX_NONFINITE_STEPS:
                raise NonFiniteLossError(f"finetune: the loss was non-finite for {fit.nonfinite} consecutive steps "
                                         f"({fit.name}, seed {fit.schedule.seed}); lower finetune.learning_rate or use "
                                         "fp32/bf16")
            loss_sum += value * units
            labelled += units
        return loss_sum / max(labelled, 1)

    def seed_scores(self, encoder: PreTrainedModel) -> list[float]:
        """The headline score (accuracy, entity F1) after fine-tuning ``encoder`` with each seed (the
        tuning objective)."""
        return [self.prepared.scores(self.run(encoder, PRETRAINED, seed).predictions)[self.prepared.metric]
                for seed in self.config.run_seeds]


def starting_points(config: FinetuneConfig, trained: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                    pretraining: ModelConfig, init_seed: int) -> dict[str, tuple[PreTrainedModel, str]]:
    """Each baseline of ``finetune.baseline`` and how the report names it, by the name its runs go
    by (the first: ``baseline``): ``auto``, the ``model.init_from`` checkpoint, else the
    pretraining's initial weights (same config, same seed, same ``model.initialisation``); ``random``,
    those initial weights; or a model. A baseline that is another's model is compared once."""
    found: dict[str, tuple[PreTrainedModel, str]] = {}
    init_from = pretraining.init_from
    for setting in config.baselines:
        if setting == "random" or (setting == "auto" and not init_from):
            words = "the random initialisation (same shape)"
            if not init_from:  # the pretraining's own initial weights
                model = build_model(pretraining, tokenizer, init_seed)
            else:  # a checkpoint's shape, BERT's draw
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(init_seed)
                    model = trained.__class__(trained.config)
        else:
            path = init_from if setting == "auto" else setting
            model = load_for_continued_pretraining(path, tokenizer)
            words = f"the starting checkpoint {path}" if setting == "auto" else f"the checkpoint {path}"
        if any(words == known for _, known in found.values()):
            logger.info("finetune.baseline: %s is %s, compared already", setting, words)
            continue
        key = BASELINE if not found else setting if setting in ("auto", "random") else file_name(setting)
        found[key] = (model, words)
    return found


def evaluate_finetuning(trained: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, config: FinetuneConfig, *,
                        baselines: Mapping[str, tuple[PreTrainedModel, str]] | None = None, device: str = "auto",
                        precision: str = "auto", on_batch: BatchCallback | None = None,
                        prepared: Prepared | None = None, name: str = "") -> FinetuneRuns:
    """Fine-tune ``trained`` and each of ``baselines`` (:func:`starting_points`) on the task
    (``name``) with every seed."""
    started = time.perf_counter()
    prepared = prepared or prepare_task(config, tokenizer, trained.config.max_position_embeddings, name)
    baselines = dict(baselines or {})
    candidates = {PRETRAINED: trained, **{key: model for key, (model, _) in baselines.items()}}
    progress = Progress(len(candidates) * config.seeds * config.epochs, f"fine-tuning {name}".strip(), unit="epoch",
                        enabled=config.progress)
    runner = Runner.create(prepared, config, device, precision, on_batch=on_batch, progress=progress)
    logger.info("Fine-tuning%s (%s) on %d labelled examples (%d labels), evaluated on %d; %s mode, %d seed(s) x %d "
                "epoch(s), %d model(s), %s on %s", f" {name}" if name else "", prepared.kind, len(prepared.train),
                len(prepared.task.labels), len(prepared.evaluation), config.mode, config.seeds, config.epochs,
                len(candidates), runner.precision, runner.device)
    scores = {key: ModelScores(np.zeros((config.seeds, prepared.units), dtype=np.int64)) for key in candidates}
    classifier = None
    try:
        for row, seed in enumerate(config.run_seeds):
            for key, encoder in candidates.items():
                keep = config.save_model and key == PRETRAINED and row == 0
                outcome = runner.run(encoder, key, seed, keep_model=keep)
                scores[key].predictions[row] = outcome.predictions
                scores[key].runs.extend(outcome.history)
                classifier = outcome.model if keep else classifier
    finally:
        progress.close()
    return FinetuneRuns(prepared, config, scores, {key: words for key, (_, words) in baselines.items()},
                        time.perf_counter() - started, classifier, name)

