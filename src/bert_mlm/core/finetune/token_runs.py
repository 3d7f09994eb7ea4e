"""Token classification (named entities): did pretraining help the user's tagger?

The pretrained encoder and its starting point are each fine-tuned as a
``AutoModelForTokenClassification`` on the tagged sentences, with the same seeds, the same tagger
head, the same batches in the same order, the optimiser, schedule, device and precision of the
sentence-classification runs (:mod:`core.finetune.runs`). Predictions come back to the words
through their first pieces (:mod:`core.finetune.alignment`) and are scored by entity, strict IOB2
(:mod:`core.finetune.entities`). The gain reads "pretraining gained +x.x entity-F1 points [95 % CI
lo, hi]": a paired bootstrap over the eval sentences combined with the seeds' spread
(:func:`core.common.statistics.ratio_interval`), since an entity F1 is no mean of per-sentence
scores.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from bert_mlm.config import FinetuneConfig, TrainingConfig
from bert_mlm.core.common.device import autocast_dtype, resolve_device, resolve_precision
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.common.statistics import ratio_interval
from bert_mlm.core.finetune.alignment import IGNORED, AlignedSentences, align, outside_id
from bert_mlm.core.finetune.entities import EntityCounts, TagCodes
from bert_mlm.core.finetune.result import BASELINE, PRETRAINED, UNKNOWN_WARNING_RATE, points
from bert_mlm.core.finetune.runs import MAX_NONFINITE_STEPS, BatchCallback
from bert_mlm.core.finetune.tagged import TaggedTask, load_tagged_task
from bert_mlm.core.finetune.tagger import collate_tagged, fit_tag_head, predict_tags, tagger_from
from bert_mlm.core.model.checkpoints import seed_everything
from bert_mlm.core.model.optim import Optimisation
from bert_mlm.core.train.loop import epoch_batches
from bert_mlm.core.train.records import NonFiniteLossError

logger = logging.getLogger(__name__)

TOKEN_RUN_COLUMNS = ("model", "seed", "epoch", "train_loss", "eval_entity_f1", "eval_entity_precision",
                     "eval_entity_recall", "eval_token_accuracy", "learning_rate", "seconds", "data_order", "reported")


@dataclass
class PreparedTagging:
    """A token task's sentences aligned once to the pieces of the tokenizer every compared model
    shares, and the eval sentences' gold tags (word ids, flattened)."""

    task: TaggedTask
    train: AlignedSentences
    evaluation: AlignedSentences
    gold: np.ndarray
    codes: TagCodes
    pad_id: int

    @classmethod
    def build(cls, task: TaggedTask, tokenizer: PreTrainedTokenizerFast, max_length: int,
              label_all_pieces: bool = False) -> PreparedTagging:
        train, evaluation = (align(frame["tokens"].tolist(), task.tag_ids(frame), task.labels, tokenizer, max_length,
                                   label_all_pieces) for frame in (task.train, task.evaluation))
        for split, aligned in (("train", train), ("eval", evaluation)):
            logger.info("finetune: %s", aligned.report.describe(split))
        rate = evaluation.report.unknown_rate
        if rate > UNKNOWN_WARNING_RATE:
            logger.warning(
                "finetune: %.1f %% of the eval words are %s under the model's vocabulary (more than %.0f %%): the "
                "tagger barely sees them, so its result says little about pretraining. Is finetune.train_path in the "
                "language and script the model's vocabulary was built for?", 100 * rate, tokenizer.unk_token,
                100 * UNKNOWN_WARNING_RATE)
        gold = np.fromiter((i for ids in task.tag_ids(task.evaluation) for i in ids), dtype=np.int64)
        return cls(task, train, evaluation, gold, TagCodes.of(task.labels), tokenizer.pad_token_id)

    def counts(self, predictions: np.ndarray) -> EntityCounts:
        return EntityCounts.of(self.gold, predictions, self.evaluation.word_counts, self.codes)


def prepare_tagging(config: FinetuneConfig, tokenizer: PreTrainedTokenizerFast, max_positions: int) -> PreparedTagging:
    """Read, check and align ``config``'s token task (its notes logged)."""
    task = load_tagged_task(config)
    for note in task.notes:
        logger.info("finetune: %s", note)
    return PreparedTagging.build(task, tokenizer, min(config.max_length, max_positions), config.label_all_pieces)


@dataclass
class TokenRunOutcome:
    """One fine-tuning run: each eval word's predicted label id (the reported epoch), a row per
    epoch, and the tagger (only when it is to be kept)."""

    predictions: np.ndarray
    history: list[dict]
    model: PreTrainedModel | None = None


@dataclass
class _Fit:
    """One run's model and optimiser, and what carries across its epochs: the step, the streak of
    non-finite steps, and the digest of every batch's sentence indices (``data_order``)."""

    model: PreTrainedModel
    schedule: TrainingConfig
    optimisation: Optimisation
    name: str
    step: int = 0
    nonfinite: int = 0
    order: hashlib.blake2b = field(default_factory=lambda: hashlib.blake2b(digest_size=8))


@dataclass
class TokenRunner:
    """Where and how the token runs go: the prepared task, the configuration, device and precision."""

    prepared: PreparedTagging
    config: FinetuneConfig
    device: torch.device
    precision: str
    on_batch: BatchCallback | None = None
    progress: Progress | None = None

    @classmethod
    def create(cls, prepared: PreparedTagging, config: FinetuneConfig, device: str = "auto", precision: str = "auto",
               **kwargs) -> TokenRunner:
        resolved = resolve_device(device)
        return cls(prepared, config, resolved, resolve_precision(precision, resolved), **kwargs)

    def run(self, encoder: PreTrainedModel, name: str, seed: int, keep_model: bool = False) -> TokenRunOutcome:
        """Fine-tune a tagger of ``encoder`` with ``seed`` (``finetune.mode: frozen``: the probe alone)."""
        config, prepared, device = self.config, self.prepared, self.device
        amp_dtype, started = autocast_dtype(self.precision), time.perf_counter()
        model = tagger_from(encoder, prepared.task.labels, seed).to(device)
        history, best, best_predictions, best_state, stale = [], -1.0, None, None, 0
        if config.head_init == "probe" or config.mode == "frozen":
            fit_tag_head(model, prepared.train, prepared.pad_id, device, amp_dtype, seed)
            row, predictions = self._row(model, name, seed, 0 if config.mode == "full" else 1, float("nan"),
                                         float("nan"), "", started)
            history.append(row)
        epochs = config.epochs if config.mode == "full" else 0
        schedule = self._schedule(model, seed)
        optimisation = Optimisation.build(model, schedule, device, self.precision) if epochs else None
        fit = _Fit(model, schedule, optimisation, name)
        seed_everything(seed)  # dropout: the same stream for the pretrained model and its baseline
        for epoch in range(epochs):
            started = time.perf_counter()
            train_loss = self._epoch(fit, epoch)
            row, predictions = self._row(model, name, seed, epoch + 1, train_loss, fit.optimisation.learning_rate,
                                         fit.order.hexdigest(), started)
            history.append(row)
            if self.progress is not None:
                self.progress.update(1, seconds=row["seconds"], model=name, seed=seed,
                                     f1=f"{row['eval_entity_f1']:.4f}")
            if row["eval_entity_f1"] > best:
                best, best_predictions, stale = row["eval_entity_f1"], predictions, 0
                if config.early_stopping_patience and keep_model:
                    best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            else:
                stale += 1
            if config.early_stopping_patience and stale >= config.early_stopping_patience:
                if self.progress is not None:
                    self.progress.update(epochs - epoch - 1, seconds=0.0)
                break
        if not epochs and self.progress is not None:
            self.progress.update(config.epochs, seconds=history[-1]["seconds"], model=name, seed=seed)
        # Early stopping reports the best fine-tuned epoch (its weights when kept); otherwise the last.
        tuned = [row for row in history if row["epoch"] > 0]
        reported = max(tuned, key=lambda r: r["eval_entity_f1"]) if config.early_stopping_patience else tuned[-1]
        for row in history:
            row["reported"] = row is reported
        if best_state is not None:
            model.load_state_dict(best_state)
        final = best_predictions if config.early_stopping_patience and best_predictions is not None else predictions
        return TokenRunOutcome(final, history, model.to("cpu") if keep_model else None)

    def _row(self, model: PreTrainedModel, name: str, seed: int, epoch: int, train_loss: float, learning_rate: float,
             order: str, started: float) -> tuple[dict, np.ndarray]:
        """The eval predictions after ``epoch`` and its runs row (with each entity type's F1)."""
        prepared = self.prepared
        predictions = predict_tags(model, prepared.evaluation, prepared.pad_id, self.device,
                                   autocast_dtype(self.precision), outside_id(prepared.task.labels))
        scores = prepared.counts(predictions).scores()
        row = {"model": name, "seed": seed, "epoch": epoch, "train_loss": train_loss,
               "eval_entity_f1": scores["f1"], "eval_entity_precision": scores["precision"],
               "eval_entity_recall": scores["recall"], "eval_token_accuracy": scores["token_accuracy"],
               "learning_rate": learning_rate, "seconds": time.perf_counter() - started, "data_order": order,
               **{f"eval_f1_{kind}": values["f1"] for kind, values in scores["per_type"].items()}}
        return row, predictions

    def _schedule(self, model: PreTrainedModel, seed: int) -> TrainingConfig:
        """The run as the training loop's configuration, as the sentence runs set it: AdamW groups,
        linear warmup and decay, the project's optimizer step, and batches drawn from (seed, epoch)."""
        config = self.config
        total = config.epochs * math.ceil(len(self.prepared.train) / config.batch_size)
        return TrainingConfig(max_steps=total, batch_size=config.batch_size,
                              learning_rate=config.learning_rate_for(model.config.hidden_size),
                              weight_decay=config.weight_decay, adam_beta2=0.999, adam_epsilon=1e-8, schedule="linear",
                              warmup_steps=round(config.warmup_ratio * total), seed=seed, precision=self.precision,
                              progress=False)

    def _epoch(self, fit: _Fit, epoch: int) -> float:
        """One pass in (seed, epoch)'s batch order: the mean loss per labelled piece."""
        prepared, device, amp_dtype = self.prepared, self.device, autocast_dtype(self.precision)
        model, optimisation = fit.model, fit.optimisation
        model.train()
        loss_sum, pieces = 0.0, 0
        for indices in epoch_batches(prepared.train.lengths, fit.schedule, epoch):
            fit.order.update(np.ascontiguousarray(indices, dtype=np.int64).tobytes())
            if self.on_batch is not None:
                self.on_batch(fit.name, fit.schedule.seed, epoch, indices)
            batch = {k: v.to(device, non_blocking=True)
                     for k, v in collate_tagged(prepared.train, indices, prepared.pad_id).items()}
            labels = batch.pop("labels")
            with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                logits = model(**batch).logits
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORED)
            optimisation.scaler.scale(loss).backward()
            loss = loss.detach()
            labelled = int((labels != IGNORED).sum())
            value = float(loss)
            _, diverged = optimisation.step(model, loss, fit.step)
            fit.step += 1
            fit.nonfinite = fit.nonfinite + 1 if bool(diverged) else 0
            if fit.nonfinite >= MAX_NONFINITE_STEPS:
                raise NonFiniteLossError(f"finetune: the loss was non-finite for {fit.nonfinite} consecutive steps "
                                         f"({fit.name}, seed {fit.schedule.seed}); lower finetune.learning_rate or "
                                         "use fp32/bf16")
            loss_sum += value * labelled
            pieces += labelled
        return loss_sum / max(pieces, 1)

    def seed_f1s(self, encoder: PreTrainedModel) -> list[float]:
        """Eval entity F1 after fine-tuning ``encoder`` with each seed (a tuning objective)."""
        return [self.prepared.counts(self.run(encoder, PRETRAINED, seed).predictions).scores()["f1"]
                for seed in self.config.run_seeds]


@dataclass
class TokenFinetuneResult:
    """Every token run of one fine-tuning evaluation and what it says (:meth:`metrics`):
    ``predictions`` per model, (seeds, eval words) label ids."""

    prepared: PreparedTagging
    config: FinetuneConfig
    predictions: dict[str, np.ndarray]
    history: list[dict]
    baseline: str
    seconds: float
    classifier: PreTrainedModel | None = None
    _counts: dict = field(default_factory=dict, repr=False)

    def counts(self, name: str) -> list[EntityCounts]:
        """Each seed's entity counts of model ``name``."""
        if name not in self._counts:
            self._counts[name] = [self.prepared.counts(row) for row in self.predictions[name]]
        return self._counts[name]

    @property
    def runs(self) -> pd.DataFrame:
        """A row per model, seed and epoch, with each entity type's F1 (``eval_f1_<type>``)."""
        types = [f"eval_f1_{kind}" for kind in self.prepared.codes.types]
        return pd.DataFrame.from_records(self.history, columns=[*TOKEN_RUN_COLUMNS[:-4], *types,
                                                                *TOKEN_RUN_COLUMNS[-4:]])

    def _interval(self, name: str, parts, against: str | None = None) -> dict:
        """The interval of a ratio of per-sentence sums (``parts``: counts -> (numerator, denominator))."""
        def arrays(model: str) -> tuple[np.ndarray, np.ndarray]:
            numerators, denominators = zip(*(parts(counts) for counts in self.counts(model)), strict=True)
            return np.stack(numerators), np.stack(denominators)

        baseline = arrays(against) if against else None
        return ratio_interval(*arrays(name), baseline, seed=self.config.seed).as_dict()

    def metrics(self) -> dict:
        prepared, config = self.prepared, self.config
        evaluation = prepared.evaluation
        entity_f1 = EntityCounts.micro_f1_parts

        def accuracy(counts: EntityCounts):
            return counts.correct_tags.astype(np.float64), counts.tags.astype(np.float64)

        metrics: dict = {
            "finetune_task": "token", "finetune_mode": config.mode, "finetune_dataset": str(config.train_path),
            "finetune_eval_dataset": str(config.eval_path or f"{config.train_path} (hash split)"),
            "finetune_train_examples": len(prepared.train), "finetune_eval_examples": len(evaluation),
            "finetune_eval_words": int(evaluation.word_counts.sum()),
            "finetune_eval_entities": {kind: int(n) for kind, n in
                                       zip(prepared.codes.types, self.counts(PRETRAINED)[0].gold.sum(0), strict=True)},
            "finetune_labels": prepared.task.labels, "finetune_label_all_pieces": config.label_all_pieces,
            "finetune_seeds": config.run_seeds, "finetune_epochs": config.epochs, "finetune_seconds": self.seconds,
            "finetune_baseline": self.baseline, "finetune_unknown_rate": evaluation.report.unknown_rate,
            "finetune_truncated_words": evaluation.report.truncated,
        }
        for name, prefix in ((PRETRAINED, "finetune_"), (BASELINE, "finetune_baseline_")):
            if name not in self.predictions:
                continue
            seeds = [counts.scores() for counts in self.counts(name)]
            f1 = self._interval(name, entity_f1)
            metrics.update({
                f"{prefix}entity_f1": f1["mean"], f"{prefix}entity_f1_se": f1["se"],
                f"{prefix}entity_precision": float(np.mean([s["precision"] for s in seeds])),
                f"{prefix}entity_recall": float(np.mean([s["recall"] for s in seeds])),
                f"{prefix}token_accuracy": float(np.mean([s["token_accuracy"] for s in seeds])),
                f"{prefix}seed_entity_f1": [s["f1"] for s in seeds],
                f"{prefix}entity_f1_per_type": {kind: float(np.mean([s["per_type"][kind]["f1"] for s in seeds]))
                                                for kind in prepared.codes.types},
            })
        if BASELINE in self.predictions:
            gain = self._interval(PRETRAINED, entity_f1, BASELINE)
            accuracy_gain = self._interval(PRETRAINED, accuracy, BASELINE)
            metrics.update({
                "finetune_entity_f1_gain": gain["mean"], "finetune_entity_f1_gain_se": gain["se"],
                "finetune_entity_f1_gain_ci_low": gain["low"], "finetune_entity_f1_gain_ci_high": gain["high"],
                "finetune_token_accuracy_gain": accuracy_gain["mean"],
                "finetune_token_accuracy_gain_ci_low": accuracy_gain["low"],
                "finetune_token_accuracy_gain_ci_high": accuracy_gain["high"],
            })
            headline = (f"fine-tuned entity F1 {metrics['finetune_entity_f1']:.3f} vs "
                        f"{metrics['finetune_baseline_entity_f1']:.3f} for {self.baseline}: pretraining gained "
                        f"{points(gain['mean'])} entity-F1 points [95 % CI {points(gain['low'])}, "
                        f"{points(gain['high'])}] (strict IOB2; {config.seeds} seed(s), {len(evaluation):,} eval "
                        f"sentences, {config.mode} fine-tuning)")
        else:
            headline = (f"fine-tuned entity F1 {metrics['finetune_entity_f1']:.3f} ± "
                        f"{metrics['finetune_entity_f1_se']:.3f} (strict IOB2; no baseline: finetune.baseline is none)")
        if evaluation.report.unknown_rate > UNKNOWN_WARNING_RATE:
            headline += (f"; WARNING: {100 * evaluation.report.unknown_rate:.0f} % of the eval words are unknown to "
                         "the model's vocabulary")
        metrics["finetune_summary"] = headline
        return metrics


def evaluate_token_finetuning(trained: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, config: FinetuneConfig, *,
                              baseline: PreTrainedModel | None = None, baseline_name: str = "none",
                              device: str = "auto", precision: str = "auto", on_batch: BatchCallback | None = None,
                              prepared: PreparedTagging | None = None) -> TokenFinetuneResult:
    """Fine-tune taggers of ``trained`` (and of ``baseline`` when given) with every seed."""
    started = time.perf_counter()
    prepared = prepared or prepare_tagging(config, tokenizer, trained.config.max_position_embeddings)
    candidates = {PRETRAINED: trained, **({BASELINE: baseline} if baseline is not None else {})}
    progress = Progress(len(candidates) * config.seeds * config.epochs, "fine-tuning", unit="epoch",
                        enabled=config.progress)
    runner = TokenRunner.create(prepared, config, device, precision, on_batch=on_batch, progress=progress)
    logger.info("Fine-tuning a tagger on %d sentences (%d labels), evaluated on %d; %s mode, %d seed(s) x %d epoch(s), "
                "%s on %s", len(prepared.train), len(prepared.task.labels), len(prepared.evaluation), config.mode,
                config.seeds, config.epochs, runner.precision, runner.device)
    words = int(prepared.evaluation.word_counts.sum())
    predictions = {name: np.zeros((config.seeds, words), dtype=np.int64) for name in candidates}
    history, classifier = [], None
    try:
        for row, seed in enumerate(config.run_seeds):
            for name, encoder in candidates.items():
                keep = config.save_model and name == PRETRAINED and row == 0
                outcome = runner.run(encoder, name, seed, keep_model=keep)
                predictions[name][row] = outcome.predictions
                history.extend(outcome.history)
                classifier = outcome.model if keep else classifier
    finally:
        progress.close()
    return TokenFinetuneResult(prepared, config, predictions, history, baseline_name, time.perf_counter() - started,
                               classifier)
