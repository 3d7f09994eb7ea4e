"""Inherited vocabularies on domain text: the [UNK] rate before and after
``tokenizer.extend_vocabulary``, and what the extension does for fine-tuning where it matters.

    python bench/vocabulary_extension.py --workdir /tmp/vocab-ext --part coverage   # tokenizers only, ~2 min
    python bench/vocabulary_extension.py --workdir /tmp/vocab-ext --part finetune   # the Kedro chain, ~1 h on 2 cores

``coverage``: inherited vocabularies (the original bert-base-chinese and bert-base-uncased ones,
and vocabularies the chain trains on news or on the Gutenberg books) measured on domain text,
then extended by the tokens that text needs (the stage's own code, core/tokens/vocabulary.py).

``finetune``: a model the chain trains on the Gutenberg books (English: its vocabulary holds no
Chinese character) continues on ChnSentiCorp's hotel reviews (the 80 % side of a hash split,
without labels) with ``tokenizer.extend_vocabulary`` 0 and 5000; each continued model is then
fine-tuned on the reviews' sentiment (1,000 labelled reviews, evaluated on the 20 % side) against
its starting point (``kedro run --pipelines finetune``), and the two continued models are paired
with each other (same seeds, data order and evaluation reviews). Every command is printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
from finetune_gain import kedro, latest_file, params, write_task_files

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT / "src"))

from bert_mlm.config import TokenizerConfig  # noqa: E402
from bert_mlm.core.data.corpus import split_paragraphs  # noqa: E402
from bert_mlm.core.finetune.result import FinetuneResults, paired_differences  # noqa: E402
from bert_mlm.core.tokens.tokenizer import load_tokenizer, train_wordpiece  # noqa: E402
from bert_mlm.core.tokens.vocabulary import adapt_vocabulary, measure_coverage  # noqa: E402
from bert_mlm.scratch import scratch_project  # noqa: E402

CORPORA = SHARED / "corpora"


def batches(texts: list[str], size: int = 2000):
    return lambda: (texts[start : start + size] for start in range(0, len(texts), size))


def coverage_table() -> pd.DataFrame:
    reviews = pd.read_csv(CORPORA / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()["review"].astype(str)
    news = (CORPORA / "msra-ner" / "news.txt").read_text(encoding="utf-8").splitlines()
    books = [p for path in sorted((CORPORA / "gutenberg").glob("*.txt"))
             for p in split_paragraphs(path.read_text(encoding="utf-8"))]
    wiki = [line for line in (CORPORA / "wikitext-2-raw" / "wiki.valid.raw").read_text(encoding="utf-8").split("\n")
            if line.strip()]
    sst2 = pd.read_csv(CORPORA / "sst2" / "train.tsv", sep="\t", quoting=3)["sentence"].astype(str).tolist()
    vocabularies = {
        "bert-base-chinese": lambda: load_tokenizer(SHARED / "vocab" / "bert-base-chinese.vocab.txt"),
        "chain, on the news": lambda: train_wordpiece(news, TokenizerConfig(vocab_size=21128)),
        "bert-base-uncased": lambda: load_tokenizer(SHARED / "vocab" / "bert-base-uncased.vocab.txt"),
        "chain, on the Gutenberg books": lambda: train_wordpiece(books, TokenizerConfig()),
    }
    cases = [("bert-base-chinese", "news", news), ("bert-base-chinese", "reviews", reviews.tolist()),
             ("chain, on the news", "reviews", reviews.tolist()), ("bert-base-uncased", "WikiText-2 valid", wiki),
             ("bert-base-uncased", "SST-2 train", sst2), ("chain, on the Gutenberg books", "WikiText-2 valid", wiki),
             ("chain, on the Gutenberg books", "SST-2 train", sst2),
             ("chain, on the Gutenberg books", "reviews", reviews.tolist())]
    built, rows = {}, []
    for name, text_name, texts in cases:
        tokenizer = built.get(name) or built.setdefault(name, vocabularies[name]())
        started = time.perf_counter()
        missing = len(measure_coverage(tokenizer, batches(texts)()).missing)
        extended, report = adapt_vocabulary(tokenizer, batches(texts), TokenizerConfig(extend_vocabulary=missing or 1),
                                            name)
        rows.append({"vocabulary": name, "tokens": len(tokenizer), "text": text_name,
                     "unk_rate_%": 100 * report.unknown_rate, "missing_forms": missing,
                     "added": report.added_tokens, "unk_rate_after_%": 100 * (report.unknown_rate_after or 0.0),
                     "commonest_missing": " ".join(c for c, _ in report.uncovered_characters[:8]),
                     "seconds": round(time.perf_counter() - started, 1)})
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def finetune_case(workdir: Path, start_steps: int, steps: int, extensions: list[int]) -> pd.DataFrame:
    files = write_task_files(workdir)
    project = workdir / "project"
    if not project.exists():
        scratch_project(workdir, ROOT)
    shutil.rmtree(project / "conf")
    shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    quiet = {"tuning.n_trials": 0, "training.checkpoint_every": 0}
    start = workdir / "start_checkpoint"
    if not start.exists():
        books = {"corpus.path": CORPORA / "gutenberg", "training.max_steps": start_steps}
        kedro(project, "run", "--params", params({**books, **quiet}))
        shutil.copytree(latest_file(project, "data/06_models/masked_lm"), start)
    task = {"finetune.train_path": files["zh_train"], "finetune.eval_path": files["zh_eval"],
            "finetune.text_column": "review", "model.init_from": start}
    results = {}
    for added in extensions:
        kedro(project, "run", "--params", params({
            "corpus.path": files["zh_train"], "corpus.text_column": "review", "model.init_from": start,
            "tokenizer.extend_vocabulary": added, "training.max_steps": steps, "training.eval_every": 100, **quiet}))
        coverage = json.loads(latest_file(project, "data/08_reporting/vocabulary_coverage.json").read_text())
        summary = json.loads(latest_file(project, "data/07_model_output/training_summary.json").read_text())
        kedro(project, "run", "--pipelines", "finetune", "--params", params(task))
        finetune = json.loads(latest_file(project, "data/08_reporting/finetune_metrics.json").read_text())
        results[f"extend {added}"] = {"coverage": coverage, "summary": summary, "finetune": finetune}
    rows = []
    for name, result in results.items():
        coverage, finetune = result["coverage"], result["finetune"]
        rows.append({
            "case": name, "unk_rate_%": 100 * coverage["unknown_rate"],
            "unk_rate_after_%": 100 * (coverage["unknown_rate_after"] if coverage.get("added_tokens")
                                       else coverage["unknown_rate"]),
            "added": coverage.get("added_tokens", 0), "final_valid_loss": result["summary"].get("final_valid_loss"),
            "finetune_accuracy": finetune["finetune_accuracy"],
            "finetune_accuracy_se": finetune["finetune_accuracy_se"],
            "start_accuracy": finetune["finetune_baseline_accuracy"], "gain_over_start": finetune["finetune_gain"],
            "gain_ci": (finetune["finetune_gain_ci_low"], finetune["finetune_gain_ci_high"]),
            "seed_accuracy": [round(a, 4) for a in finetune["finetune_seed_accuracy"]],
            "macro_f1": finetune["finetune_macro_f1"], "majority": finetune["finetune_majority_accuracy"],
        })
    table = pd.DataFrame(rows)
    names = list(results)
    paired = paired_differences({n: FinetuneResults.from_json(results[n]["finetune"]).tasks[0] for n in names},
                                names[0])
    print(paired.to_string(index=False))
    (workdir / "paired.json").write_text(paired.to_json(orient="records"))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--part", choices=("coverage", "finetune", "all"), default="all")
    parser.add_argument("--start-steps", type=int, default=300)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--extensions", default="0,5000")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    if args.part in ("coverage", "all"):
        table = coverage_table()
        table.to_csv(args.workdir / "coverage.csv", index=False)
        print(table.to_string(index=False))
    if args.part in ("finetune", "all"):
        table = finetune_case(args.workdir, args.start_steps, args.steps, [int(n) for n in args.extensions.split(",")])
        table.to_csv(args.workdir / "finetune.csv", index=False)
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
