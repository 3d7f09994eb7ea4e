"""Which pretraining budget and fine-tuning recipe make the pretrained model beat its random
initialisation? The core library alone (no Kedro): runs on a GPU machine as well as on a CPU.

    # the task files of bench/finetune_gain.py:
    python bench/finetune_sweep.py --workdir /tmp/finetune-gain
    python bench/finetune_sweep.py --workdir /tmp/finetune-gain --steps 1500,6000 --pretrain-lrs 0.002,0.001 \\
        --recipes 5e-4:mean:random,2e-4:cls:random,5e-4:mean:probe

For each case (ChnSentiCorp, SST-2): a WordPiece vocabulary and packed 128-token sequences of the
task's training text, the default 2 x 128 model pretrained (token-level masking at 0.15) for each
``--steps`` x ``--pretrain-lrs``, then every fine-tuning recipe (learning rate : pooling : head
initialisation) on it and on its random initialisation, paired (3 seeds, 1,000 examples, 3 epochs).
One JSON line per recipe; ``sweep.json`` in ``--out`` holds them all.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from bert_mlm.config import FinetuneConfig, MaskingConfig, ModelConfig, TokenizerConfig, TrainingConfig  # noqa: E402
from bert_mlm.core.finetune.runs import evaluate_finetuning, starting_points  # noqa: E402
from bert_mlm.core.model.bert import build_model  # noqa: E402
from bert_mlm.core.model.token_ids import TokenIds  # noqa: E402
from bert_mlm.core.tokens.sequences import build_sequences  # noqa: E402
from bert_mlm.core.tokens.tokenizer import encode_documents, train_wordpiece  # noqa: E402
from bert_mlm.core.train.loop import train  # noqa: E402


def cases(workdir: Path, shared: Path) -> dict:
    return {
        "zh": dict(
            corpus=workdir / "chnsenticorp_train.csv",
            column="review",
            vocab_size=21128,
            task=dict(
                train_path=str(workdir / "chnsenticorp_train.csv"),
                eval_path=str(workdir / "chnsenticorp_eval.csv"),
                text_column="review",
            ),
        ),
        "sst2": dict(
            corpus=workdir / "sst2_train.csv",
            column="sentence",
            vocab_size=8192,
            task=dict(
                train_path=str(workdir / "sst2_train.csv"),
                eval_path=str(shared / "corpora/sst2/dev.tsv"),
                text_column="sentence",
                eval_text_column="content",
            ),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True, help="where bench/finetune_gain.py wrote the task files")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--cases", default="zh,sst2")
    parser.add_argument("--steps", default="1500")
    parser.add_argument("--pretrain-lrs", default="0.002")
    parser.add_argument("--recipes", default="5e-4:mean:probe,5e-4:mean:random,2e-4:mean:random,2e-4:cls:random")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    results = []
    for name in args.cases.split(","):
        case = cases(args.workdir, args.shared)[name]
        texts = pd.read_csv(case["corpus"])[case["column"]].dropna().astype(str).tolist()
        vocabulary = TokenizerConfig(vocab_size=case["vocab_size"], min_frequency=2, base_alphabet="none")
        tokenizer = train_wordpiece(texts, vocabulary)
        sequences = build_sequences(encode_documents(tokenizer, texts), "packed", 128, tokenizer.cls_token_id,
                                    tokenizer.sep_token_id)
        ids = TokenIds.from_tokenizer(tokenizer)
        for steps in map(int, args.steps.split(",")):
            for pretrain_lr in map(float, args.pretrain_lrs.split(",")):
                model = build_model(ModelConfig(), tokenizer, seed=42)
                started = time.perf_counter()
                history = train(model, sequences, ids, MaskingConfig(), TrainingConfig(
                    max_steps=steps, learning_rate=pretrain_lr, warmup_steps=max(36, steps // 20), progress=False),
                    ids.collator(128, "dynamic")).history
                pretrained = {"mlm_loss": float(history["loss"].tail(50).mean()),
                              "mlm_accuracy": float(history["accuracy"].tail(50).mean()),
                              "pretrain_seconds": time.perf_counter() - started}
                for recipe in args.recipes.split(","):
                    learning_rate, pooling, head_init = recipe.split(":")
                    config = FinetuneConfig(**case["task"], learning_rate=float(learning_rate), pooling=pooling,
                                            head_init=head_init, progress=False)
                    baselines = starting_points(config, model, tokenizer, ModelConfig(), 42)
                    started = time.perf_counter()
                    metrics = evaluate_finetuning(model, tokenizer, config,
                                                  baselines=baselines).task_result().to_json()
                    row = {
                        "case": name,
                        "steps": steps,
                        "pretrain_lr": pretrain_lr,
                        **pretrained,
                        "recipe": recipe,
                        "finetune_seconds": time.perf_counter() - started,
                        **{
                            k: metrics[k]
                            for k in (
                                "finetune_accuracy",
                                "finetune_baseline_accuracy",
                                "finetune_gain",
                                "finetune_gain_ci_low",
                                "finetune_gain_ci_high",
                            )
                        },
                    }
                    results.append(row)
                    print(json.dumps(row), flush=True)
                    (args.out / "sweep.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
