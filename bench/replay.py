"""Replay and forgetting: does mixing general text into continued pretraining let a higher rate
keep its domain gain at the default rate's forgetting? And what does the two-objective study
(``tuning.objective: continued``) find and adopt on the same setup?

    python bench/replay.py --workdir /tmp/ner                # ~1 h on 2 cores (the general model reused)
    python bench/replay.py --workdir /tmp/ner --report       # the tables of the saved results
    python bench/replay.py --workdir /tmp/ner --language en --no-study   # English books -> SST-2 sentences

With this project's core library (what the nodes call), on ``bench/continued_pretraining.py``'s
Chinese setup (a ``--workdir`` of that bench, or of ``bench/token_classification.py``, is shared:
the general model is not trained again, and its share-0 runs are the plain continued runs):

1. **Grid**: the general 4 x 256 model (msra news) continued on ChnSentiCorp reviews for
   ``--steps`` steps (10 % warmup) at each learning rate of ``--learning-rates`` (1e-4: the
   continuing default; 1e-3: the from-scratch rate at 256 wide) and each replay share of
   ``--shares``: the share of each epoch drawn from the general train split (the project's
   mixture plan, :func:`bert_mlm.core.tokens.blend.plan_mixture`, as ``corpus.replay`` draws it).
   Scored, paired against the starting model on the same masks: the domain's held-out loss change
   and the general test split's (forgetting; never replayed: the hash split keeps it apart).
2. **Study**: :func:`bert_mlm.core.study.continued.tune_continued` with ``--trials`` trials of the
   same budget over ``replay_share: [0, 0.5]`` and ``learning_rate: [5e-5, 2e-3]`` (QMC), one seed,
   ``tuning.forgetting_budget`` ``--budget``; its Pareto front beside the grid, the point it adopted
   and why (the paired confirmation against the configured 1e-4 with share 0.1).
3. **Fine-tuning gain** of the models of ``--finetune-points`` (``rate:share``), each paired against
   the starting model (the token-classification bench's protocol: 500 labelled examples, 3 seeds,
   the same batches for every model of a seed): sentiment (ChnSentiCorp / SST-2) and, in Chinese,
   MSRA NER. Does replay keep the fine-tuning gain that the domain loss promises?
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from _timing import machine_info
from continued_pretraining import LANGUAGES, MAX_LENGTH, MODEL, Case, experiment, general_texts, sequences_of
from token_classification import Bench as TaskBench

from bert_mlm.config import EvaluationConfig, MaskingConfig, SequenceConfig, TrainingConfig, TuningConfig
from bert_mlm.core.data.corpus import RawText
from bert_mlm.core.data.sources.settings import source_settings
from bert_mlm.core.evaluate.protocol import paired_change
from bert_mlm.core.model.bert import load_for_continued_pretraining
from bert_mlm.core.study.continued import tune_continued
from bert_mlm.core.study.tuning import trials_table
from bert_mlm.core.tokens.blend import SourceSpan, plan_mixture
from bert_mlm.core.train.experiment import Experiment


class Mixed(list):
    """The domain's and the general text's training sequences, drawn by a mixture plan (what the
    token store's indexed sequences carry as ``sources`` and ``mixture``)."""

    sources: list[SourceSpan]
    mixture: object
    fingerprint: str = "bench/replay.py"  # the study's name needs one (the token store's digest elsewhere)


def mixed(domain: list[np.ndarray], general: list[np.ndarray], share: float) -> Mixed:
    sequences = Mixed(domain + general)
    sequences.sources = [SourceSpan("domain", 0, len(domain)), SourceSpan("replay", len(domain), len(sequences))]
    sequences.mixture = plan_mixture(sequences.sources, source_settings(
        {"domain": {"weight": 1 - share}, "replay": {"weight": share}}))
    return sequences


class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.case = Case(LANGUAGES[args.language], args)
        self.out = self.case.out / "replay"
        (self.out / "models").mkdir(parents=True, exist_ok=True)
        texts = general_texts(args.language, args.tiny)
        self.general_train = sequences_of(texts["train"], self.case.tokenizer)
        self.general_test = texts["test"]

    def point(self, learning_rate: float, share: float, keep_model: bool = False) -> dict:
        """The general model continued at ``learning_rate`` with ``share`` replay, scored paired (and
        saved when ``keep_model``: the same seed trains the same model again where only the scores were kept)."""
        if share == 0:  # the plain continued run (saved by the shared bench)
            record = self.case.continued(learning_rate, 0.1)
            return {**record, "share": 0.0}
        path = self.out / f"lr{learning_rate:g}-share{share:g}.json"
        if path.exists() and (not keep_model or (self.out / "models" / path.stem).exists()):
            return json.loads(path.read_text())
        started, case, steps = time.perf_counter(), self.case, self.args.steps
        model = load_for_continued_pretraining(case.directory, case.tokenizer)
        sequences = mixed(case.domain_train, self.general_train, share)
        experiment(case.tokenizer, sequences, steps, learning_rate, round(0.1 * steps)).train(model)
        record = {"learning_rate": learning_rate, "share": share, "steps": steps}
        for name, scorer in case.scorers.items():
            record[name] = paired_change(scorer(model), case.start_scores[name]).to_json()
        record["seconds"] = time.perf_counter() - started
        if keep_model:
            model.save_pretrained(self.out / "models" / path.stem)
        path.write_text(json.dumps(record, indent=1))
        print(f"lr {learning_rate:g} share {share:g}: domain {record['domain']['eval_loss_change']:+.3f}, general "
              f"{record['general']['eval_loss_change']:+.3f}, {record['seconds']:.0f} s", flush=True)
        return record

    def study(self) -> dict:
        path = self.out / "study.json"
        if path.exists():
            return json.loads(path.read_text())
        case, args = self.case, self.args
        domain_test = case.scorers["domain"].set.sequences
        train = mixed(case.domain_train, self.general_train, 0.1)
        model = MODEL.model_copy(update={"init_from": str(case.directory)})
        study_experiment = Experiment(
            tokenizer=case.tokenizer, sequences={"train": train, "valid": Mixed(domain_test)}, model_config=model,
            training=TrainingConfig(max_steps=args.steps, batch_size=32, learning_rate=1e-4,
                                    warmup_steps=round(0.1 * args.steps), progress=False, seed=42),
            masking=MaskingConfig(), evaluation=EvaluationConfig(),
            sequence_config=SequenceConfig(max_length=MAX_LENGTH))
        config = TuningConfig(objective="continued", n_trials=args.trials, trial_steps=args.steps, seeds=1,
                              forgetting_budget=args.budget, storage=f"sqlite:///{self.out}/study.db",
                              search_space={"replay_share": [0.0, 0.5], "learning_rate": [5e-5, 2e-3]})
        general = (RawText("news.txt", text, is_document=True) for text in self.general_test)
        sources = {"domain": {"weight": 0.9}, "replay": {"weight": 0.1, "train_only": True}}
        started = time.perf_counter()
        _, _, record, study = tune_continued(study_experiment, config, general, None, sources)
        trials = trials_table(study)
        result = {"trials": trials[["number", "params_replay_share", "params_learning_rate", "values_0",
                                    "attr_domain_change_se", "values_1", "attr_general_change_se",
                                    "pareto"]].to_dict("records"),
                  "record": record.to_json(), "decision": record.decision, "seconds": time.perf_counter() - started}
        path.write_text(json.dumps(result, indent=1, default=float))
        return result


class Gains(TaskBench):
    """The token-classification bench's fine-tuning and pairing, over the replay grid's models too
    (Chinese: its predictions directory is shared, so the starting model's runs are reused)."""

    def __init__(self, bench: Bench) -> None:
        self.args, self.case, self.replay = bench.args, bench.case, bench
        self.tokenizer, self.prepared = bench.case.tokenizer, {}
        self.out = self.args.workdir / "ner" if self.args.language == "zh" else bench.out / "finetune"
        self.out.mkdir(parents=True, exist_ok=True)

    def model(self, name: str):
        if not name.startswith("replay-"):
            return super().model(name)
        return load_for_continued_pretraining(self.replay.out / "models" / name.removeprefix("replay-"),
                                              self.tokenizer)

    def gains(self, points: list[tuple[float, float]]) -> list[dict]:
        tasks = ["sentiment"] + (["ner"] if self.args.language == "zh" else [])
        rows = []
        for learning_rate, share in points:
            self.replay.point(learning_rate, share, keep_model=True)
            name = f"lr{learning_rate:g}" if share == 0 else f"replay-lr{learning_rate:g}-share{share:g}"
            for task in tasks:
                size = self.args.finetune_train if task == "sentiment" else self.args.ner_size
                rows.append({**self.pair(name, "general", task, size), "learning_rate": learning_rate, "share": share})
                print(json.dumps(rows[-1]), flush=True)
        (self.replay.out / "finetune.json").write_text(json.dumps(rows, indent=1))
        return rows


def gains_table(rows: list[dict]) -> list[str]:
    lines = ["| learning rate | replay share | task (metric) | continued model | starting model | gain (points) "
             "[95 % CI] |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['learning_rate']:g} | {row['share']:.0%} | {row['task']} ({row['metric']}) | "
                     f"{row['model_score']:.3f} | {row['baseline_score']:.3f} | {100 * row['gain']:+.1f} "
                     f"[{100 * row['low']:+.1f}, {100 * row['high']:+.1f}] |")
    return lines


def report(bench_dir: Path, grid: list[dict], study: dict | None, gains: list[dict] | None = None) -> str:
    lines = ["| learning rate | replay share | domain loss change (± paired SE) | general loss change: forgetting "
             "(± paired SE) |", "|---|---|---|---|"]
    for row in sorted(grid, key=lambda r: (r["learning_rate"], r["share"])):
        domain, general = row["domain"], row["general"]
        lines.append(f"| {row['learning_rate']:g} | {row['share']:.0%} | {domain['eval_loss_change']:+.3f} ± "
                     f"{domain['eval_loss_change_se']:.3f} | {general['eval_loss_change']:+.3f} ± "
                     f"{general['eval_loss_change_se']:.3f} |")
    if study:
        lines += ["", "| trial | replay share | learning rate | domain loss change | forgetting | Pareto front |",
                  "|---|---|---|---|---|---|"]
        for trial in sorted(study["trials"], key=lambda t: t["number"]):
            lines.append(f"| {trial['number']} | {trial['params_replay_share']:.1%} | "
                         f"{trial['params_learning_rate']:.2g} | {trial['values_0']:+.3f} ± "
                         f"{trial['attr_domain_change_se']:.3f} | {trial['values_1']:+.3f} ± "
                         f"{trial['attr_general_change_se']:.3f} | {'yes' if trial['pareto'] else ''} |")
        lines += ["", f"Adopted: {json.dumps(study['record'].get('corpus') or {})} "
                      f"{json.dumps(study['record'].get('training') or {})} (source {study['record']['source']}); "
                      f"decision: {study['decision']}. Study: {study['seconds'] / 60:.0f} min."]
    if gains:
        lines += [""] + gains_table(gains)
    return "\n".join(lines + ["", f"Machine: {json.dumps(machine_info())}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--language", choices=sorted(LANGUAGES), default="zh")
    parser.add_argument("--learning-rates", default="1e-4,1e-3")
    parser.add_argument("--shares", default="0,0.05,0.1,0.25,0.5")
    parser.add_argument("--finetune-points", default="1e-4:0,1e-4:0.1,1e-3:0,1e-3:0.1,1e-3:0.5",
                        help="rate:share models fine-tuned (sentiment; NER in Chinese); empty: none")
    parser.add_argument("--no-study", action="store_true", help="the grid (and gains) only")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--general-steps", type=int, default=500)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--budget", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    args.learning_rates = [float(v) for v in args.learning_rates.split(",")]
    args.shares = [float(v) for v in args.shares.split(",")]
    args.finetune_points = [tuple(float(v) for v in point.split(":")) for point in args.finetune_points.split(",")
                            if point]
    args.finetune_train, args.finetune_eval, args.finetune_seeds, args.finetune_length = 500, 872, 3, 64
    # The token-classification bench's NER protocol (its runs are reused: their file names carry the size).
    args.eval, args.seeds, args.ner_size = 1000, 3, 500
    if args.tiny:
        args.general_steps, args.steps, args.trials, args.finetune_train, args.finetune_eval = 20, 4, 3, 60, 60
        args.eval, args.seeds, args.ner_size = 100, 2, 60
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = args.workdir / args.language / "replay"
    if args.report:
        grid = [json.loads(p.read_text()) for p in sorted(out.glob("lr*.json"))]
        grid += [{**json.loads(p.read_text()), "share": 0.0} for p in sorted(
            (args.workdir / args.language / "runs").glob("lr*-warmup0.1.json"))
            if json.loads(p.read_text())["learning_rate"] in args.learning_rates]
        study = json.loads((out / "study.json").read_text()) if (out / "study.json").exists() else None
        gains = json.loads((out / "finetune.json").read_text()) if (out / "finetune.json").exists() else None
        print(report(out, grid, study, gains))
        return
    bench = Bench(args)
    # The plain continued runs (share 0) last: bench/token_classification.py, sharing the workdir, may be training them.
    shares = sorted(args.shares, key=lambda share: share == 0)
    keep = set(args.finetune_points)
    grid = [bench.point(rate, share, (rate, share) in keep) for share in shares for rate in args.learning_rates]
    gains = Gains(bench).gains(args.finetune_points) if args.finetune_points else None
    study = None if args.no_study else bench.study()
    print(report(out, grid, study, gains))


if __name__ == "__main__":
    main()
