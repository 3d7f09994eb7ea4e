"""Time to quality: how many steps (and seconds) training needs to leave the unigram plateau and to
reach the Hugging Face recipe's quality, with this project's defaults and with each lever changed.

    python bench/time_to_quality.py --seeds 3                       # default 2 x 128 model, English
    python bench/time_to_quality.py --layers 4 --hidden 256 --seeds 3   # the benchmark configuration
    python bench/time_to_quality.py --language zh                   # MSRA news -> its held-out split

One run, side by side: the Hugging Face Trainer with its own defaults (``DataCollatorForLanguageModeling``,
lr 5e-5, no warmup: what a user of the run_mlm recipe gets) trains the same model shape on the same
packed sequences for ``--hf-steps`` (900) steps and is scored with this project's fixed protocol on the
held-out text (English: WikiText-2 valid, a domain the Gutenberg books are not; Chinese: the news
sentences' test split); its accuracy is target (b). Target (a), off the plateau, is the run report's own
test (``core.evaluate.result.off_plateau``): accuracy at least 1.2x the most-frequent-token accuracy on
the same held-out text, and fewer than 80 % of the top-1 predictions among the 10 most frequent training
tokens (a model can pass the first alone by filling every mask with ``，的。国``). Then this project's loop
trains with its defaults and with each lever changed, validating every ``--eval-every`` steps on the
same held-out text (the same fixed masks at every step), ``--seeds`` seeds each: the first step (and the
training seconds to it) at which validation passes each target. A lever that leaves the plateau sooner
but ends with a higher loss at the budget is no better: the final validation loss is in the table too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _data import prepare
from _hf import train_with_hf_trainer
from _timing import Table, machine_info

from bert_mlm.config import EvaluationConfig, MaskingConfig, ModelConfig, SequenceConfig, TrainingConfig
from bert_mlm.core.evaluate.protocol import baseline_accuracy, evaluate, most_frequent_token, prepare_evaluation_set
from bert_mlm.core.model.bert import build_model
from bert_mlm.core.train.experiment import Experiment
from bert_mlm.core.train.loop import train
from bert_mlm.core.train.result import plateau_steps

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "corpora"
HELD_OUT = EvaluationConfig(mask_draws=1, min_masked_tokens=4000)

# Each lever: what it changes from the defaults (training, masking, model dropout, other model settings).
LEVERS = {
    "defaults (auto rate, 10 % warmup, linear decay)": {},
    "dropout 0.1": {"dropout": 0.1},
    "peak rate x2": {"rate_factor": 2.0},
    "peak rate x4": {"rate_factor": 4.0},
    "triangular (50 % warmup, linear decay)": {"training": {"warmup_steps": "half"}},
    "cosine decay": {"training": {"schedule": "cosine"}},
    "batch 16": {"training": {"batch_size": 16}},
    "no clipping": {"training": {"max_grad_norm": None}},
    "clipping 0.5": {"training": {"max_grad_norm": 0.5}},
    "bert init (BERT's normal draw at 0.02: the defaults before model.initialisation)": {
        "model": {"initialisation": "bert", "initializer_range": 0.02}},
    "bert init 0.05 (initial weights' standard deviation; BERT: 0.02)": {
        "model": {"initialisation": "bert", "initializer_range": 0.05}},
    "local init 0.02 (first-layer heads on the neighbours)": {
        "model": {"initialisation": "local", "initializer_range": 0.02}},
    "local init 0.05": {"model": {"initialisation": "local", "initializer_range": 0.05}},
    # Above width 128 the auto rate of local initialisation is half the 2e-3 x 128 / width rule.
    "local init 0.03 (auto's choice at 4 x 256)": {"model": {"initialisation": "local", "initializer_range": 0.03}},
    "mask rate 0.30 -> 0.15": {"masking": {"probability": 0.3, "schedule": "linear", "final_probability": 0.15}},
    "combined: triangular and mask rate 0.30 -> 0.15 (the two lowest final losses)": {
        "training": {"warmup_steps": "half"},
        "masking": {"probability": 0.3, "schedule": "linear", "final_probability": 0.15}},
    # Not settings of the loop: measured here first (PhasedCollator), built into it if they win.
    "64-token halves for the first half (each sequence cut in two: the same text a step)": {
        "phase": {"pieces": 2, "short_fraction": 0.5}},
    "64-token halves for the first 30 %": {"phase": {"pieces": 2, "short_fraction": 0.3}},
    "batch ramp 8 -> 32 sequences over the first half": {"phase": {"ramp_from": 8, "ramp_fraction": 0.5}},
}


class PhasedCollator:
    """The loop's collator, changed for the first steps of a run: a short-sequence phase (BERT trained
    90 % of its steps at 128 tokens before 512) cuts each packed ``[CLS] ... [SEP]`` sequence into
    ``pieces`` pieces of ``max_length / pieces`` tokens, each with its own ``[CLS]`` and ``[SEP]`` (the
    same text a step but 2 tokens a piece, in more, shorter rows); a batch ramp keeps only the first
    ``ramp_from`` ... all sequences of each batch, growing linearly (fewer tokens a step, cheaper
    steps). A lever of the
    benchmark, not of the loop: the loop collates once per micro-batch, so the calls count the steps
    (one micro-batch a step, no resume)."""

    def __init__(self, inner, steps: int, pieces: int = 1, short_fraction: float = 0.0, ramp_from: int = 0,
                 ramp_fraction: float = 0.0) -> None:
        self.inner, self.calls = inner, 0
        self.pieces, self.short_steps = pieces, round(short_fraction * steps)
        self.ramp_from, self.ramp_steps = ramp_from, round(ramp_fraction * steps)

    def __getattr__(self, name):  # whole_word, max_length, ...: the loop's collator's
        return getattr(self.inner, name)

    def collate(self, sequences, indices) -> dict[str, torch.Tensor]:
        step, self.calls = self.calls, self.calls + 1
        indices = list(indices)
        if step < self.ramp_steps:
            keep = self.ramp_from + (len(indices) - self.ramp_from) * step / self.ramp_steps
            indices = indices[: max(1, min(len(indices), int(keep)))]
        rows = [np.asarray(sequences[i]) for i in indices]
        if step < self.short_steps:
            content = self.max_length // self.pieces - 2  # 62 of 126 tokens: the pieces pad to 64, not 72
            rows = [np.concatenate([row[:1], row[1 + start : min(1 + start + content, len(row) - 1)], row[-1:]])
                    for row in rows for start in range(0, min(len(row) - 2, content * self.pieces), content)]
        return self.inner(rows)


def corpora(language: str) -> tuple[str, str | None]:
    if language == "zh":
        return str(SHARED / "msra-ner" / "news.txt"), None
    return str(SHARED / "gutenberg"), str(SHARED / "wikitext-2-raw" / "wiki.valid.raw")


def model_config(layers: int, hidden: int, dropout: float = 0.0, **model) -> ModelConfig:
    return ModelConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=max(2, hidden // 64),
                       intermediate_size=4 * hidden, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                       **model)


def first_step(curve: list[tuple[int, float, float]], threshold: float) -> tuple[int | None, float | None]:
    """The first (step, training seconds) whose validation accuracy reaches ``threshold``."""
    return next(((step, seconds) for step, seconds, accuracy in curve if accuracy >= threshold), (None, None))


def run(args) -> Table:
    corpus, extra = corpora(args.language)
    prepared = prepare(corpus, extra, max_length=128, vocab_size=8192 if args.language == "en" else 21128)
    held_out = prepared.sequences["extra" if extra else "test"]
    sequences = {"train": prepared.sequences["train"], "valid": held_out}
    tokenizer = prepared.tokenizer
    base = Experiment(tokenizer, sequences, model_config(args.layers, args.hidden),
                      TrainingConfig(max_steps=args.steps, batch_size=32, progress=False, seed=1),
                      MaskingConfig(), HELD_OUT, SequenceConfig(max_length=128))
    ids = base.token_ids
    evaluation_set = prepare_evaluation_set(held_out, ids.collator(128), ids.mask, ids.replacement, HELD_OUT)
    frequent = most_frequent_token(prepared.sequences["train"], ids.special)
    unigram = baseline_accuracy(evaluation_set, frequent)
    # (b): the HF recipe's quality after --hf-steps, on the same held-out masks.
    if args.hf_accuracy is None:
        # BERT's initialisation, whatever this project's default: the recipe as a user of run_mlm gets it.
        hf_model = build_model(base.model_config.replace(initialisation="bert", initializer_range=0.02), tokenizer,
                               seed=1)
        started = time.perf_counter()
        _, _, hf_seconds = train_with_hf_trainer(hf_model, prepared.sequences["train"], tokenizer,
                                                 TrainingConfig(max_steps=args.hf_steps, batch_size=32, seed=1),
                                                 hf_defaults=True)
        hf_accuracy, hf_source = evaluate(hf_model, evaluation_set, 64)["eval_accuracy"], "in this run"
        print(f"HF recipe: {args.hf_steps} steps in {hf_seconds:.0f} s ({time.perf_counter() - started:.0f} s with "
              f"set-up), accuracy {hf_accuracy:.4f}; unigram {unigram:.4f}", file=sys.stderr, flush=True)
    elif args.hf_seconds is None:
        raise SystemExit("--hf-accuracy needs --hf-seconds: the earlier run's training seconds")
    else:  # an earlier run's measurement on the same held-out masks (the HF recipe is the slow part)
        hf_accuracy, hf_seconds, hf_source = args.hf_accuracy, args.hf_seconds, "in an earlier run (--hf-accuracy)"
    rows = []
    for name, lever in LEVERS.items():
        for seed in range(1, args.seeds + 1):
            training = dict(lever.get("training", {}))
            if training.get("warmup_steps") == "half":
                training["warmup_steps"] = args.steps // 2
            config = TrainingConfig(**{"batch_size": 32, **training}, max_steps=args.steps, progress=False, seed=seed,
                                    eval_every=args.eval_every, eval_masked_tokens=HELD_OUT.min_masked_tokens)
            shape = model_config(args.layers, args.hidden, lever.get("dropout", 0), **lever.get("model", {}))
            if "rate_factor" in lever:  # times the auto rate of this model (halved for local wider than 128)
                rule = config.peak_learning_rate(args.hidden, local=shape.starts_locally())
                config = config.replace(learning_rate=rule * lever["rate_factor"])
            experiment = Experiment(tokenizer, sequences, shape, config, MaskingConfig(**lever.get("masking", {})),
                                    HELD_OUT, SequenceConfig(max_length=128))
            if "phase" in lever:  # the loop's own train(), with the benchmark's collator
                collator = PhasedCollator(experiment.collator, args.steps, **lever["phase"])
                result = train(experiment.new_model(), sequences["train"], experiment.token_ids, experiment.masking,
                               experiment.training, collator, validation=experiment.validation(experiment.training))
            else:
                result = experiment.train(experiment.new_model())
            history = result.history
            seconds = history["seconds"].cumsum()
            validated = history.assign(elapsed=seconds).dropna(subset=["valid_accuracy"])
            curve = list(validated[["step", "elapsed", "valid_accuracy"]].itertuples(index=False, name=None))
            plateau = plateau_steps(history, validated)
            off, off_seconds = plateau.get("plateau_left_step"), plateau.get("plateau_left_seconds")
            reached, reached_seconds = first_step(curve, hf_accuracy)
            rows.append({"lever": name, "seed": seed, "off": off, "off_seconds": off_seconds, "hf": reached,
                         "hf_seconds": reached_seconds, "final_loss": float(validated["valid_loss"].iloc[-1]),
                         "final_accuracy": float(validated["valid_accuracy"].iloc[-1]), "seconds": result.seconds})
            print(name, rows[-1], file=sys.stderr, flush=True)

    def cell(name: str, key: str, digits: int = 0) -> str:
        values = [row[key] for row in rows if row["lever"] == name]
        known = [value for value in values if value is not None]
        if not known:
            return f"not within {args.steps}"
        middle = statistics.median(known)
        missing = f" ({len(values) - len(known)} not)" if len(known) < len(values) else ""
        return f"{middle:,.{digits}f} [{min(known):,.{digits}f}-{max(known):,.{digits}f}]{missing}"

    table = Table(f"Time to quality: {args.layers} x {args.hidden}, {args.language}",
                  ["lever", "step off the plateau", "seconds to it", f"step to the HF recipe's {args.hf_steps}-step "
                   "accuracy", "seconds to it", "final valid loss", "final valid accuracy"])
    for name in LEVERS:
        table.rows.append([name, cell(name, "off"), cell(name, "off_seconds", 1), cell(name, "hf"),
                           cell(name, "hf_seconds", 1), cell(name, "final_loss", 4), cell(name, "final_accuracy", 4)])
    table.notes = [
        f"Held-out text: {'WikiText-2 valid' if extra else 'the test split'} ({HELD_OUT.min_masked_tokens:,} masked "
        f"tokens, fixed masks, every {args.eval_every} steps); most-frequent-token accuracy {unigram:.4f} (target "
        f"(a): {1.2 * unigram:.4f}, with < 80 % of predictions among the 10 most frequent tokens); the HF Trainer "
        f"with its defaults reached {hf_accuracy:.4f} after {args.hf_steps} steps in {hf_seconds:.0f} s {hf_source} "
        f"(target (b)). Medians [min-max] over seeds 1..{args.seeds}; seconds are the "
        f"loop's training seconds to the step (validation excluded); {args.steps} steps of 32 x 128 each"
        f"{' (16 x 128 for batch 16)' if 'batch 16' in LEVERS else ''}, "
        f"{torch.get_num_threads()} thread(s). {machine_info()}"]
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", default="en", choices=("en", "zh"))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--hf-steps", type=int, default=900)
    parser.add_argument("--hf-accuracy", type=float, help="the HF recipe's accuracy from an earlier run (skips it)")
    parser.add_argument("--hf-seconds", type=float, help="and its training seconds (with --hf-accuracy)")
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--levers", default="", help="comma-separated lever names (default: all)")
    args = parser.parse_args()
    if args.levers:
        wanted = args.levers.split(",")
        for name in list(LEVERS):
            if not any(name.startswith(prefix) for prefix in wanted):
                del LEVERS[name]
    np.random.seed(0)
    print(run(args).markdown(), flush=True)


if __name__ == "__main__":
    main()
