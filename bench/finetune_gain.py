"""Does pretraining help the task? Task-adaptive and continued pretraining, judged by fine-tuning
against the starting point in the same run (`kedro run --pipelines finetune`).

    python bench/finetune_gain.py --workdir /tmp/finetune-gain            # every case, every stage
    python bench/finetune_gain.py --workdir /tmp/finetune-gain --stage finetune   # re-run the fine-tuning only

Cases (each in its own scratch copy of the project, printed command by command):
- ``zh``: ChnSentiCorp. Its reviews are split once by a hash of the text (80/20); the model
  pretrains (``--env zh``: a Chinese vocabulary, whole-word masking on jieba words) on the 80 %
  side's reviews without their labels, then fine-tunes on 1,000 of them and is evaluated on the
  20 % side, against the random initialisation of the same shape.
- ``sst2``: SST-2. Pretraining on the training sentences (no labels), fine-tuning on 1,000 of them,
  evaluation on the 872 dev sentences, against the random initialisation.
- ``zh_token``: the ``zh`` case with token-level (single-character) masking (``--cases zh_token``).
- ``continued``: a model pretrained on the Gutenberg books continues on the SST-2 training
  sentences (``model.init_from``); its fine-tuning gain is measured over that Gutenberg checkpoint.

Pretraining is the default 2 x 128 model for ``--steps`` (1,500) steps at the configured masking.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT / "src"))

from bert_mlm.core.finetune.labelled import hash_fraction  # noqa: E402
from bert_mlm.scratch import scratch_project  # noqa: E402


def write_task_files(workdir: Path) -> dict[str, Path]:
    """ChnSentiCorp split 80/20 by a hash of the review; SST-2's training sentences as CSV (the
    corpus reader takes CSV, not TSV)."""
    files = {"zh_train": workdir / "chnsenticorp_train.csv", "zh_eval": workdir / "chnsenticorp_eval.csv",
             "sst2_train": workdir / "sst2_train.csv"}
    reviews = pd.read_csv(SHARED / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    held_out = hash_fraction(reviews["review"].astype(str), seed=7) < 0.2
    reviews[~held_out].to_csv(files["zh_train"], index=False)
    reviews[held_out].to_csv(files["zh_eval"], index=False)
    sst2 = pd.read_csv(SHARED / "corpora" / "sst2" / "train.tsv", sep="\t", quoting=3)
    sst2.to_csv(files["sst2_train"], index=False)
    return files


def kedro(project: Path, *args: str) -> None:
    command = [str(Path(sys.executable).parent / "kedro"), *args]
    print(f"$ (cd {project} && kedro {shlex.join(args)})", flush=True)
    subprocess.run(command, cwd=project, check=True)


def params(values: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items())


def latest_file(project: Path, relative: str) -> Path:
    folder = project / relative
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))[-1] / folder.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--cases", default="zh,sst2,continued")
    parser.add_argument("--stage", choices=("all", "pretrain", "finetune"), default="all")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    files = write_task_files(args.workdir)
    pretrain = {"training.max_steps": args.steps, "tuning.n_trials": 0, "training.checkpoint_every": 0}
    cases = {
        "zh": dict(env="zh", corpus={"corpus.path": files["zh_train"], "corpus.text_column": "review"},
                   finetune={"finetune.train_path": files["zh_train"], "finetune.eval_path": files["zh_eval"],
                             "finetune.text_column": "review"}),
        "sst2": dict(env="base", corpus={"corpus.path": files["sst2_train"], "corpus.text_column": "sentence"},
                     finetune={"finetune.train_path": files["sst2_train"],
                               "finetune.eval_path": SHARED / "corpora" / "sst2" / "dev.tsv",
                               "finetune.text_column": "sentence", "finetune.eval_text_column": "content"}),
    }
    cases["continued"] = dict(cases["sst2"], start={"corpus.path": SHARED / "corpora" / "gutenberg"})
    # The zh case with token-level (single-character) masking, as Google's bert-base-chinese.
    cases["zh_token"] = dict(cases["zh"], corpus={**cases["zh"]["corpus"], "masking.whole_word": "false"})
    results = {}
    for name in args.cases.split(","):
        case = cases[name]
        project = args.workdir / name / "project"
        if not project.exists():
            (args.workdir / name).mkdir(parents=True, exist_ok=True)
            scratch_project(args.workdir / name, ROOT)
        # The project's conf/ as it is now (a rerun of the fine-tuning takes new parameters).
        shutil.rmtree(project / "conf")
        shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
        (project / "conf" / "local").mkdir()
        env = ["--env", case["env"]] if case["env"] != "base" else []
        if args.stage in ("all", "pretrain"):
            corpus = dict(case["corpus"])
            if "start" in case:  # first the starting checkpoint, on other text
                kedro(project, "run", *env, "--params", params({**case["start"], **pretrain}))
                start = latest_file(project, "data/06_models/masked_lm")
                shutil.copytree(start, args.workdir / name / "start_checkpoint", dirs_exist_ok=True)
                corpus["model.init_from"] = args.workdir / name / "start_checkpoint"
            kedro(project, "run", *env, "--params", params({**corpus, **pretrain}))
        if args.stage in ("all", "finetune"):
            extra = {"model.init_from": args.workdir / name / "start_checkpoint"} if "start" in case else {}
            kedro(project, "run", *env, "--pipelines", "finetune", "--params", params({**case["finetune"], **extra}))
            results[name] = json.loads(latest_file(project, "data/08_reporting/finetune_metrics.json").read_text())
    for name, metrics in results.items():
        print(f"{name}: {metrics['finetune_summary']}")
        print(f"  pretrained {metrics['finetune_accuracy']:.4f} ± {metrics['finetune_accuracy_se']:.4f} per seed "
              f"{[round(a, 4) for a in metrics['finetune_seed_accuracy']]}; baseline "
              f"{metrics['finetune_baseline_accuracy']:.4f} ± {metrics['finetune_baseline_accuracy_se']:.4f} per seed "
              f"{[round(a, 4) for a in metrics['finetune_baseline_seed_accuracy']]}; macro-F1 "
              f"{metrics['finetune_macro_f1']:.4f} vs {metrics['finetune_baseline_macro_f1']:.4f}")


if __name__ == "__main__":
    main()
