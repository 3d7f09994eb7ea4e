"""Continued pretraining: which learning rate and warmup should a model that already knows the
language be continued with?

    python bench/continued_pretraining.py --workdir /tmp/cpt --languages zh &   # the two languages side by
    python bench/continued_pretraining.py --workdir /tmp/cpt --languages en &   # side, one thread each (~3 h)
    python bench/continued_pretraining.py --workdir /tmp/cpt --report           # the tables from saved results
    python bench/continued_pretraining.py --workdir /tmp/cpt-tiny --tiny        # a dry run in a few minutes

Per language, with this project's core library (what the nodes call; no Kedro in between):

1. **A general model from scratch**: Chinese news (``msra-ner/news.txt``, every line one
   document) or the English Gutenberg books; a WordPiece vocabulary trained on the general train
   split (Chinese: one token per character, as ``--env zh``), a 4 x 256 model trained for
   ``--general-steps`` of 32 x 128 at the from-scratch ``auto`` rate (1e-3 at 256 wide), 10 %
   warmup. It is checked to be well above the most-frequent-token reference (off the unigram
   plateau) and saved as a model directory, as ``model.init_from`` takes it.
2. **Continued on a domain** for ``--steps`` steps with the general model's tokenizer, at every
   learning rate of ``--learning-rates`` with a 10 % warmup, then at the warmups of ``--warmups``
   with the learning rate that lowered the domain loss most: Chinese hotel reviews (ChnSentiCorp,
   the 80 % side of a hash split of the reviews, without labels) or the English SST-2 training
   sentences. Same seed for every run: the same data order and training masks.
3. **Measured against the starting model, paired**: the fixed evaluation protocol (15 % masks,
   ``evaluation.seed``, 8 draws, 20,000 masked tokens) on the domain's held-out text (the 20 %
   side of the reviews / SST-2 dev) and on the general test split, the starting model scored on the
   same masked tokens (``paired_change``: the change with its paired standard error); and the
   fine-tuning gain on the domain's task (ChnSentiCorp sentiment: ``--finetune-train`` (500)
   reviews of the 80 % side, ``--finetune-eval`` (872) of the 20 % side; SST-2: 500 training
   sentences, the 872 dev sentences; ``--finetune-length`` 64 tokens), the finetune pipeline's
   protocol otherwise (LP-FT head, mean pooling, lr auto, 3 epochs), ``--finetune-seeds`` (3)
   seeds, each seed's runs paired with the starting model's (same head, batches and order), with
   ``core.finetune.runs.interval``'s 95 % interval (seeds and eval examples).

Every finished stage is saved under ``--workdir`` (``<lang>/general``, ``<lang>/runs/<name>.json``):
a rerun after a crash skips what is done. ``--report`` prints the Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _timing import machine_info
from finetune_gain import write_task_files
from transformers import BertForMaskedLM, PreTrainedTokenizerBase

from bert_mlm.config import (
    EvaluationConfig,
    FinetuneConfig,
    MaskingConfig,
    ModelConfig,
    SequenceConfig,
    TokenizerConfig,
    TrainingConfig,
)
from bert_mlm.core.data.corpus import RawText, clean_documents
from bert_mlm.core.data.sources import read_corpus
from bert_mlm.core.evaluate.protocol import (
    SequenceScores,
    baseline_accuracy,
    most_frequent_token,
    paired_change,
    prepare_evaluation_set,
    score_sequences,
)
from bert_mlm.core.finetune.result import interval
from bert_mlm.core.finetune.runs import PreparedTask, Runner, prepare_task
from bert_mlm.core.model.bert import build_model, load_for_continued_pretraining
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.sequences import build_sequences
from bert_mlm.core.tokens.tokenizer import encode_documents, load_tokenizer, train_wordpiece
from bert_mlm.core.train.experiment import Experiment

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "corpora"
MAX_LENGTH = 128


@dataclass(frozen=True)
class Language:
    name: str
    general: str  # the general corpus, for the table
    domain: str
    task: str
    tokenizer: TokenizerConfig


LANGUAGES = {
    "zh": Language("zh", "msra-ner news (46,000 sentences)", "ChnSentiCorp reviews", "ChnSentiCorp sentiment",
                   TokenizerConfig(vocab_size=21128, chinese_chars=True, limit_alphabet=None)),
    "en": Language("en", "Gutenberg (13 books)", "SST-2 training sentences", "SST-2 sentiment",
                   TokenizerConfig(vocab_size=8192)),
}


# ----------------------------------------------------------------------------- data
def general_texts(language: str, tiny: bool) -> dict[str, list[str]]:
    """The general corpus cleaned and hash-split as the ingestion node does (90/5/5)."""
    if language == "zh":  # one sentence per line: every line a document (issue #34's corpus.line_by_line)
        lines = (SHARED / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()
        items = [RawText("news.txt", line, is_document=True) for line in lines if line.strip()]
    else:
        items = read_corpus(SHARED / "gutenberg")
    documents, _ = clean_documents(items, ratios={"train": 0.9, "valid": 0.05, "test": 0.05})
    texts = {split: documents.loc[documents["split"] == split, "text"].tolist() for split in ("train", "test")}
    if tiny:
        texts = {split: values[: 2000 if split == "train" else 200] for split, values in texts.items()}
    return texts


def domain_task(language: str, workdir: Path, finetune_train: int, finetune_eval: int, seeds: int,
                tiny: bool) -> tuple[dict, FinetuneConfig]:
    """The domain's unlabelled text (train: what training continues on; test: held out) and its task."""
    workdir.mkdir(parents=True, exist_ok=True)
    files = write_task_files(workdir)
    examples = finetune_train
    if language == "zh":
        train = pd.read_csv(files["zh_train"])["review"].astype(str).tolist()
        test = pd.read_csv(files["zh_eval"])["review"].astype(str).tolist()
        task = FinetuneConfig(train_path=str(files["zh_train"]), eval_path=str(files["zh_eval"]), text_column="review",
                              max_train_examples=examples, max_eval_examples=finetune_eval, seeds=seeds,
                              progress=False)
    else:
        train = pd.read_csv(files["sst2_train"])["sentence"].astype(str).tolist()
        test = pd.read_csv(SHARED / "sst2" / "dev.tsv", sep="\t", quoting=3)["content"].astype(str).tolist()
        task = FinetuneConfig(train_path=str(files["sst2_train"]), eval_path=str(SHARED / "sst2" / "dev.tsv"),
                              text_column="sentence", eval_text_column="content", max_train_examples=examples,
                              max_eval_examples=finetune_eval, seeds=seeds, progress=False)
    if tiny:
        train, test = train[:2000], test[:300]
    return {"train": train, "test": test}, task


def sequences_of(texts: list[str], tokenizer: PreTrainedTokenizerBase) -> list[np.ndarray]:
    encoded = encode_documents(tokenizer, texts)
    return build_sequences(encoded, "packed", MAX_LENGTH, tokenizer.cls_token_id, tokenizer.sep_token_id)


def unknown_rate(sequences: list[np.ndarray], tokenizer: PreTrainedTokenizerBase) -> float:
    tokens = np.concatenate(sequences)
    return float((tokens == tokenizer.unk_token_id).mean())


# ----------------------------------------------------------------------------- models
MODEL = ModelConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)


def experiment(tokenizer, train: list[np.ndarray], steps: int, learning_rate, warmup_steps: int) -> Experiment:
    return Experiment(
        tokenizer=tokenizer, sequences={"train": train}, model_config=MODEL,
        training=TrainingConfig(max_steps=steps, batch_size=32, learning_rate=learning_rate, warmup_steps=warmup_steps,
                                progress=False, seed=42),
        masking=MaskingConfig(), evaluation=EvaluationConfig(), sequence_config=SequenceConfig(max_length=MAX_LENGTH),
    )


class Scorer:
    """The fixed protocol on one held-out set (the defaults: 15 %, seed 20231, 8 draws, 20,000
    masked tokens), with the general train split's most-frequent token as the reference."""

    def __init__(self, tokenizer, held_out: list[np.ndarray], frequent: int) -> None:
        ids = TokenIds.from_tokenizer(tokenizer)
        self.set = prepare_evaluation_set(held_out, ids.collator(MAX_LENGTH), ids.mask, ids.replacement,
                                          EvaluationConfig())
        self.reference = baseline_accuracy(self.set, frequent)

    def __call__(self, model: BertForMaskedLM) -> SequenceScores:
        return score_sequences(model, self.set, batch_size=128)


def general_model(language: Language, workdir: Path, texts: dict, steps: int) -> tuple[Path, dict]:
    """Train (or load, when a previous run saved it) the general model."""
    directory = workdir / language.name / "general"
    summary_path = directory / "summary.json"
    if summary_path.exists():
        return directory, json.loads(summary_path.read_text())
    started = time.perf_counter()
    tokenizer = train_wordpiece(texts["train"], language.tokenizer)
    train = sequences_of(texts["train"], tokenizer)
    run = experiment(tokenizer, train, steps, "auto", max(1, steps // 10))
    model = build_model(MODEL, tokenizer, seed=42)
    print(f"[{language.name}] general model: {len(train):,} sequences, vocabulary {len(tokenizer):,}, "
          f"{steps} steps", flush=True)
    result = run.train(model)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    summary = {"train_sequences": len(train), "vocabulary": len(tokenizer), "steps": steps,
               "learning_rate": run.training.peak_learning_rate(MODEL.hidden_size),
               "final_train_loss": float(result.history["loss"].tail(20).mean()),
               "seconds": time.perf_counter() - started}
    summary_path.write_text(json.dumps(summary, indent=1))
    return directory, summary


def finetune_predictions(model: BertForMaskedLM, prepared: PreparedTask, config: FinetuneConfig) -> np.ndarray:
    """Eval predictions (seeds x examples) of ``model`` fine-tuned with every seed."""
    runner = Runner.create(prepared, config, device="cpu")
    return np.stack([runner.run(model, "pretrained", seed).predictions for seed in config.run_seeds])


def paired_gain(predictions: np.ndarray, start: np.ndarray, labels: np.ndarray) -> dict:
    correct, start_correct = (predictions == labels).astype(float), (start == labels).astype(float)
    difference = correct - start_correct
    gain = interval(difference.mean(1), difference.mean(0))
    return {"accuracy": float(correct.mean()), "start_accuracy": float(start_correct.mean()),
            **{f"gain_{k}": getattr(gain, k) for k in ("mean", "se", "low", "high")}}


def net_gain(record: dict) -> float:
    """Domain loss gained minus general loss lost: the trade-off the warmups are tried at."""
    return -record["domain"]["eval_loss_change"] - record["general"]["eval_loss_change"]


class Case:
    """One language's data, starting model and scorers, and its runs saved under ``workdir/<lang>``."""

    def __init__(self, language: Language, args) -> None:
        self.language, self.args = language, args
        self.out = args.workdir / language.name
        (self.out / "runs").mkdir(parents=True, exist_ok=True)
        texts = general_texts(language.name, args.tiny)
        self.directory, general = general_model(language, args.workdir, texts, args.general_steps)
        self.tokenizer = tokenizer = load_tokenizer(self.directory)
        domain, task = domain_task(language.name, args.workdir / "tasks" / language.name, args.finetune_train,
                                   args.finetune_eval, args.finetune_seeds, args.tiny)
        self.task = task.replace(max_length=args.finetune_length)
        self.domain_train = sequences_of(domain["train"], tokenizer)
        counts = np.bincount(np.concatenate(sequences_of(texts["train"], tokenizer)), minlength=len(tokenizer))
        frequent = most_frequent_token(counts, TokenIds.from_tokenizer(tokenizer).special)
        self.scorers = {"domain": Scorer(tokenizer, sequences_of(domain["test"], tokenizer), frequent),
                        "general": Scorer(tokenizer, sequences_of(texts["test"], tokenizer), frequent)}
        start = BertForMaskedLM.from_pretrained(self.directory)
        self.start_scores = {name: scorer(start) for name, scorer in self.scorers.items()}
        metrics = {name: scores.summary().to_json() for name, scores in self.start_scores.items()}
        self.start_file = self.out / "start.json"
        saved = json.loads(self.start_file.read_text()) if self.start_file.exists() else {}
        saved.update({"general": general, "domain_train_sequences": len(self.domain_train),
                      "domain_unknown_rate": unknown_rate(self.domain_train, tokenizer),
                      "reference_accuracy": {name: scorer.reference for name, scorer in self.scorers.items()},
                      "metrics": metrics})
        self.start_file.write_text(json.dumps(saved, indent=1))
        print(f"[{language.name}] start: general acc {metrics['general']['eval_accuracy']:.4f} (reference "
              f"{self.scorers['general'].reference:.4f}), general loss {metrics['general']['eval_loss']:.3f}, "
              f"domain loss {metrics['domain']['eval_loss']:.3f}", flush=True)

    def continued(self, learning_rate: float, warmup: float) -> dict:
        """Continue the general model on the domain (or load the saved run) and score it, paired."""
        name = f"lr{learning_rate:g}-warmup{warmup:g}"
        path, model_dir = self.out / "runs" / f"{name}.json", self.out / "models" / name
        if path.exists():
            return json.loads(path.read_text())
        started = time.perf_counter()
        model = load_for_continued_pretraining(self.directory, self.tokenizer)
        steps = self.args.steps
        result = experiment(self.tokenizer, self.domain_train, steps, learning_rate, round(warmup * steps)).train(model)
        record = {"name": name, "learning_rate": learning_rate, "warmup": warmup, "steps": steps,
                  "final_train_loss": float(result.history["loss"].tail(20).mean()),
                  "train_seconds": time.perf_counter() - started}
        for set_name, scorer in self.scorers.items():
            scores = scorer(model)
            record[set_name] = paired_change(scores, self.start_scores[set_name]).to_json()
        record["seconds"] = time.perf_counter() - started
        model.save_pretrained(model_dir)  # fine-tuned in the last stage
        path.write_text(json.dumps(record, indent=1))
        print(f"[{self.language.name}] {name}: domain loss {record['domain']['eval_loss_change']:+.3f} "
              f"(± {record['domain']['eval_loss_change_se']:.3f}), general loss "
              f"{record['general']['eval_loss_change']:+.3f}, {record['seconds']:.0f} s", flush=True)
        return record

    @property
    def prepared(self) -> PreparedTask:
        if not hasattr(self, "_prepared"):
            self._prepared = prepare_task(self.task, self.tokenizer, 512)
        return self._prepared

    def finetune_start(self) -> np.ndarray:
        """The starting model fine-tuned with every seed (saved: the reference every gain pairs with)."""
        labels, start_file = self.prepared.evaluation.labels, self.out / "start_finetune.npy"
        if not start_file.exists():
            started = time.perf_counter()
            model = BertForMaskedLM.from_pretrained(self.directory)
            np.save(start_file, finetune_predictions(model, self.prepared, self.task))
            print(f"[{self.language.name}] starting model fine-tuned in {time.perf_counter() - started:.0f} s",
                  flush=True)
        start = np.load(start_file)
        saved = json.loads(self.start_file.read_text())
        saved.update({"finetune_accuracy": float((start == labels).mean()),
                      "finetune_majority": float(np.bincount(labels).max() / len(labels)),
                      "finetune_train_examples": len(self.prepared.train), "finetune_eval_examples": len(labels),
                      "finetune_seeds": self.task.seeds, "finetune_epochs": self.task.epochs,
                      "finetune_max_length": self.task.max_length})
        self.start_file.write_text(json.dumps(saved, indent=1))
        return start

    def finetune(self, name: str) -> None:
        """A continued model fine-tuned with the same seeds as the starting model; the gain paired."""
        path = self.out / "runs" / f"{name}.json"
        record = json.loads(path.read_text())
        if "finetune" in record:
            return
        start, labels = self.finetune_start(), self.prepared.evaluation.labels
        started = time.perf_counter()
        model = BertForMaskedLM.from_pretrained(self.out / "models" / name)
        record["finetune"] = paired_gain(finetune_predictions(model, self.prepared, self.task), start, labels)
        record["finetune_seconds"] = time.perf_counter() - started
        path.write_text(json.dumps(record, indent=1))
        print(f"[{self.language.name}] {name}: fine-tuning gain {100 * record['finetune']['gain_mean']:+.1f} pts "
              f"[{100 * record['finetune']['gain_low']:+.1f}, {100 * record['finetune']['gain_high']:+.1f}], "
              f"{record['finetune_seconds']:.0f} s", flush=True)


def run(args) -> None:
    """Stage by stage, every language at each stage, so that an interrupted run has the most
    important numbers first: the learning-rate sweep, the warmups, then the fine-tuning (the
    starting models, then the runs in the order they trained)."""
    cases = [Case(LANGUAGES[name], args) for name in args.languages.split(",")]
    default_warmup, order = 0.1, {case: [] for case in cases}
    for learning_rate in args.learning_rates:
        for case in cases:
            order[case].append(case.continued(learning_rate, default_warmup)["name"])
    for case in cases:
        sweep = [case.continued(rate, default_warmup) for rate in args.learning_rates]
        chosen = max(sweep, key=net_gain)["learning_rate"]
        order[case] += [case.continued(chosen, warmup)["name"] for warmup in args.warmups if warmup != default_warmup]
    for case in cases:
        case.finetune_start()
    for position in range(max(len(names) for names in order.values())):
        for case, names in order.items():
            if position < len(names):
                case.finetune(names[position])


# ----------------------------------------------------------------------------- report
def interval_text(mean: float, se: float, scale: float = 1.0, digits: int = 3) -> str:
    return f"{scale * mean:+.{digits}f} ± {scale * se:.{digits}f}"


def report(workdir: Path) -> str:
    lines = []
    for language in LANGUAGES.values():
        out = workdir / language.name
        if not (out / "start.json").exists():
            continue
        start = json.loads((out / "start.json").read_text())
        runs = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]
        runs.sort(key=lambda r: (-r["learning_rate"], r["warmup"]))
        metrics, general = start["metrics"], start["general"]
        tuned = (f"Fine-tuned from the general model: {start['finetune_accuracy']:.4f} "
                 f"({start['finetune_train_examples']:,} training, {start['finetune_eval_examples']:,} eval examples, "
                 f"majority class {start['finetune_majority']:.3f}, {start['finetune_seeds']} seeds x "
                 f"{start['finetune_epochs']} epochs, {start.get('finetune_max_length')} tokens)."
                 if "finetune_accuracy" in start else "")
        lines += [
            f"#### {language.name}: {language.general} -> {language.domain}", "",
            f"General model: 4 x 256, vocabulary {general['vocabulary']:,}, {general['steps']:,} steps of 32 x 128 "
            f"from scratch at lr {general['learning_rate']:g} ({general['seconds'] / 60:.0f} min): general test "
            f"loss {metrics['general']['eval_loss']:.3f}, accuracy {metrics['general']['eval_accuracy']:.4f} "
            f"(most-frequent-token reference {start['reference_accuracy']['general']:.4f}); on the domain's held-out "
            f"text loss {metrics['domain']['eval_loss']:.3f}, accuracy {metrics['domain']['eval_accuracy']:.4f}. "
            f"Domain training text: {start['domain_train_sequences']:,} sequences, [UNK] rate "
            f"{100 * start['domain_unknown_rate']:.2f} %. {tuned}", "",
            "| learning rate | warmup | domain loss change | general loss change (forgetting) | domain acc | "
            "general acc | fine-tuned acc | fine-tuning gain, points [95 % CI] | train s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for run in runs:
            domain, general_change = run["domain"], run["general"]
            tuned = run.get("finetune")
            gain = (f"{tuned['accuracy']:.4f} | {100 * tuned['gain_mean']:+.1f} [{100 * tuned['gain_low']:+.1f}, "
                    f"{100 * tuned['gain_high']:+.1f}]" if tuned else "not yet | not yet")
            lines.append(
                f"| {run['learning_rate']:g} | {round(run['warmup'] * run['steps'])} ({100 * run['warmup']:.0f} %) "
                f"| {interval_text(domain['eval_loss_change'], domain['eval_loss_change_se'])} "
                f"| {interval_text(general_change['eval_loss_change'], general_change['eval_loss_change_se'])} "
                f"| {domain['eval_accuracy']:.4f} | {general_change['eval_accuracy']:.4f} | {gain} "
                f"| {run['train_seconds']:.0f} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--languages", default="zh,en")
    parser.add_argument("--general-steps", type=int, default=500, help="steps of the general model from scratch")
    parser.add_argument("--steps", type=int, default=100, help="steps of continued pretraining")
    parser.add_argument("--learning-rates", default="2e-3,5e-4,1e-4,5e-5,1e-3",
                        help="in the order they run (and are fine-tuned): the last ones are dropped first if cut short")
    parser.add_argument("--warmups", default="0,0.1,0.3",
                        help="warmup fractions, tried at the learning rate of the best net gain (domain + general)")
    parser.add_argument("--finetune-seeds", type=int, default=3)
    parser.add_argument("--finetune-train", type=int, default=500, help="training examples of the task")
    parser.add_argument("--finetune-eval", type=int, default=872, help="eval examples of the task (SST-2 dev: 872)")
    parser.add_argument("--finetune-length", type=int, default=64, help="finetune.max_length (tokens)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (on 2 cores shared with other work, 1 measured 1.8x faster than 2)")
    parser.add_argument("--tiny", action="store_true", help="a dry run: small data, few steps")
    parser.add_argument("--report", action="store_true", help="print the tables of the saved results and stop")
    args = parser.parse_args()
    if args.report:
        print(report(args.workdir))
        return
    args.learning_rates = [float(v) for v in args.learning_rates.split(",")]
    args.warmups = [float(v) for v in args.warmups.split(",")]
    if args.tiny:
        args.general_steps, args.steps, args.finetune_seeds, args.finetune_train, args.finetune_eval = 20, 6, 2, 60, 60
    args.workdir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    info = machine_info()
    print(f"machine: {info}; loadavg {Path('/proc/loadavg').read_text().strip()}", flush=True)
    run(args)
    seconds = time.perf_counter() - started
    machine = args.workdir / f"machine-{args.languages.replace(',', '-')}.json"
    machine.write_text(json.dumps({
        **info, "seconds": seconds, "arguments": {k: str(v) for k, v in vars(args).items()},
        "loadavg_end": Path("/proc/loadavg").read_text().strip(), "model": MODEL.model_dump()}, indent=1))
    print(f"done in {seconds / 60:.0f} min; loadavg {Path('/proc/loadavg').read_text().strip()}", flush=True)
    print(report(args.workdir))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    torch.manual_seed(0)
    main()
