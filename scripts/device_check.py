"""The device check of issue #26, in one call: the GPU table, then `kedro run --env gpu` end to end.

    python scripts/device_check.py                      # on a CUDA GPU: under 5 minutes on an H200
    python scripts/device_check.py --device cpu --tiny  # dry run of every code path, anywhere

Part 1, for each batch size (256 and 1024) and each system: this project's ``train()`` eager and
with ``training.compile=true``, the Hugging Face ``Trainer`` with ``DataCollatorForLanguageModeling``
(run_mlm's recipe, ``bench/_hf.py``) eager and with ``torch_compile=True``; BERT-base, sequences of
128 random tokens (throughput does not depend on the token values), bf16. It prints one JSON line
per run and the Markdown table: non-padding tokens/s after the first ``--skip`` steps (compile and
warm-up), MFU as model FLOPs (``core.model.bert.training_flops_per_token``, the head at the masked
positions only, the same for both systems) over a bf16 matmul peak measured in the same call, the
ratio to HF eager at the same batch, and peak allocated GPU memory.

Part 2: ``kedro run --env gpu`` in a scratch copy of the project (``bert_mlm.scratch``) on a small
corpus (the built-in one, Python's docstrings, with a few Chinese lines added), with a short step
budget and no tuning trials; it must finish and write metrics.json.

On the lent device (/work/.library/device/README.md) torch, transformers, pandas and pyarrow are
installed; kedro, kedro-datasets, optuna, dask/distributed and jieba (and what they need that is
missing there) travel as wheels. Once, here, in the repository root::

    echo /.whl/ >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \\
        -d .whl kedro==VERSION kedro-datasets==VERSION optuna==VERSION dask==VERSION distributed==VERSION \\
        jieba==VERSION ...   # the versions of /work/main/.venv (pip freeze); each missing dependency too

and the run (``carry: [".whl"]``, timeout 600)::

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \\
        .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit; python3 scripts/device_check.py

``--skip-kedro`` or ``--systems``/``--batches`` shorten a rerun. The dry run (``--device cpu
--tiny``: 2 layers x 64 wide, batch 8, a few steps, fp32 unless told) exercises the same
code, compile included, in well under a minute; ``tests/test_device_check.py`` runs it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "scripts")]

from _hf import train_with_hf_trainer  # noqa: E402  (bench/, on the path above)
from cuda_checks import matmul_peak_flops  # noqa: E402

from bert_mlm.config import MaskingConfig, TrainingConfig  # noqa: E402
from bert_mlm.core.model.bert import training_flops_per_token  # noqa: E402
from bert_mlm.core.model.token_ids import TokenIds  # noqa: E402
from bert_mlm.core.tokens.sequences import Collator  # noqa: E402
from bert_mlm.core.train.loop import train  # noqa: E402

SYSTEMS = ("project", "project-compiled", "hf", "hf-compiled")
LABELS = {
    "project": "project", "project-compiled": "project, training.compile=true",
    "hf": "HF Trainer", "hf-compiled": "HF Trainer, torch_compile=True",
}
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0-4, as cuda_checks.py uses them
CHINESE_LINES = [
    "自然语言处理是人工智能的一个重要方向，它研究人与计算机之间用自然语言进行有效通信的各种理论和方法。",
    "掩码语言模型在预训练时随机遮盖一部分词，然后根据上下文预测被遮盖的词。",
    "今天天气很好，我们一起去公园散步，顺便讨论一下模型训练的速度。",
]


def synthetic_tokenizer(vocab_size: int, folder: Path) -> BertTokenizerFast:
    """A WordPiece tokenizer over made-up words: the HF collator needs one, and nothing may be
    downloaded; the ids match the random token data."""
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + [f"w{i}" for i in range(len(SPECIAL), vocab_size)]) + "\n")
    return BertTokenizerFast(vocab_file=str(vocab))


def bert_config(args: argparse.Namespace) -> BertConfig:
    return BertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64), intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.seq_len), attn_implementation="sdpa", pad_token_id=0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )


def random_sequences(count: int, seq_len: int, vocab: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [np.concatenate(([2], rng.integers(len(SPECIAL), vocab, seq_len - 2), [3])).astype(np.int32)
            for _ in range(count)]


def run_project(config: BertConfig, sequences, args, batch: int, compiled: bool) -> float:
    """Non-padding tokens/s of this project's loop after ``args.skip`` steps. The loop reads the
    device once per ``record_every`` steps; with record_every = skip the first read covers
    exactly the skipped steps, so the rest is timed without them."""
    ids = TokenIds(pad=0, mask=4, special=list(range(len(SPECIAL))), replacement=torch.arange(len(SPECIAL), args.vocab))
    training = TrainingConfig(
        max_steps=args.steps, batch_size=batch, learning_rate=1e-4, warmup_steps=2, precision=args.precision,
        device=args.device, progress=False, bucketing=False, compile=compiled, record_every=args.skip,
    )
    result = train(BertForMaskedLM(config), sequences, ids, MaskingConfig(), training,
                   Collator(0, ids.special, args.seq_len, "static"))
    timed = result.history.iloc[args.skip:]
    if not np.isfinite(result.history["loss"]).all():
        raise SystemExit(f"device check: non-finite loss in the project run at batch {batch}")
    return float(timed["tokens"].sum() / timed["seconds"].sum())


def run_hf(config: BertConfig, sequences, tokenizer, args, batch: int, compiled: bool) -> float:
    training = TrainingConfig(max_steps=args.steps, batch_size=batch, learning_rate=1e-4, warmup_steps=2,
                              precision=args.precision, device=args.device, progress=False)
    ends, tokens, _ = train_with_hf_trainer(BertForMaskedLM(config), sequences, tokenizer, training,
                                            extra_arguments={"torch_compile": compiled})
    return sum(tokens[args.skip:args.steps]) / (ends[-1] - ends[args.skip - 1])


def release(device: torch.device) -> None:
    """Between runs: no compiled graph, cached block or peak carries over to the next one."""
    torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def throughput_table(args: argparse.Namespace) -> list[dict]:
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.precision]
    peak = matmul_peak_flops(device, dtype) if device.type == "cuda" else matmul_peak_flops(device, dtype, 1024, 3)
    config = bert_config(args)
    flops = training_flops_per_token(config, args.seq_len, 0.15)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = synthetic_tokenizer(args.vocab, Path(folder))
        for batch in args.batches:
            sequences = random_sequences(batch * args.steps, args.seq_len, args.vocab)
            for system in args.systems:
                release(device)
                torch.manual_seed(0)
                started = time.perf_counter()
                if system.startswith("project"):
                    rate = run_project(config, sequences, args, batch, system.endswith("compiled"))
                else:
                    rate = run_hf(config, sequences, tokenizer, args, batch, system.endswith("compiled"))
                memory = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
                rows.append({"batch": batch, "system": system, "tokens_per_second": round(rate),
                             "mfu": round(rate * flops / peak, 4), "peak_memory_gib": memory and round(memory, 1),
                             "wall_seconds": round(time.perf_counter() - started, 1),
                             "matmul_peak_tflops": round(peak / 1e12, 1)})
                print(json.dumps(rows[-1]), flush=True)
    release(device)
    return rows


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu (dry run)"
    lines = [f"{args.layers} layers x {args.hidden}, seq {args.seq_len}, {args.precision}, {args.steps} steps "
             f"(first {args.skip} not timed), on {name}; MFU over a measured {rows[0]['matmul_peak_tflops']} "
             "TFLOP/s matmul peak", "",
             "| batch | system | tokens/s | MFU | vs HF eager | peak GiB |", "|---|---|---|---|---|---|"]
    for row in rows:
        reference = next((r["tokens_per_second"] for r in rows if r["batch"] == row["batch"] and r["system"] == "hf"),
                         None)
        ratio = f"{row['tokens_per_second'] / reference:.2f}x" if reference else "-"
        memory = "-" if row["peak_memory_gib"] is None else f"{row['peak_memory_gib']:.1f}"
        lines.append(f"| {row['batch']} | {LABELS[row['system']]} | {row['tokens_per_second']:,} | {row['mfu']:.1%} | "
                     f"{ratio} | {memory} |")
    return "\n".join(lines)


def small_corpus(folder: Path, max_files: int | None) -> Path:
    """The built-in corpus (docstrings of the standard library) plus a few Chinese lines, as text
    files: real prose, nothing to download, nothing copied into the repository."""
    from bert_mlm.core.data.sources import builtin_corpus

    corpus = folder / "corpus"
    corpus.mkdir()
    texts = [raw.text for raw in builtin_corpus(max_files)]
    (corpus / "docstrings.txt").write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    (corpus / "chinese.txt").write_text("\n\n".join(CHINESE_LINES * 20) + "\n", encoding="utf-8")
    return corpus


def kedro_run(args: argparse.Namespace) -> dict:
    """``kedro run --env gpu`` in a scratch project; returns metrics.json."""
    from bert_mlm.scratch import scratch_project

    with tempfile.TemporaryDirectory(prefix="bert-mlm-device-check-") as folder:
        project = scratch_project(folder, ROOT)
        corpus = args.corpus or small_corpus(Path(folder), 40 if args.tiny else None)
        params = {"corpus.path": corpus, "training.max_steps": args.kedro_steps, "training.warmup_steps": 2,
                  "training.checkpoint_every": max(1, args.kedro_steps // 2), "tuning.n_trials": 0}
        if args.tiny:  # the gpu environment's sizes, made tiny, on the CPU
            params.update({"training.device": args.device, "training.batch_size": 8,
                           "training.gradient_accumulation_steps": 1, "tokenizer.vocab_size": 1000,
                           "model.hidden_size": 32, "model.num_hidden_layers": 1, "model.num_attention_heads": 2,
                           "model.intermediate_size": 64, "evaluation.batch_size": 32})
        command = [sys.executable, "-m", "kedro", "run", "--env", "gpu",
                   "--params", ",".join(f"{key}={value}" for key, value in params.items())]
        env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
        started = time.perf_counter()
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"device check: kedro run --env gpu failed ({done.returncode}):\n{done.stderr[-4000:]}")
        found = sorted((project / "data" / "08_reporting" / "metrics.json").glob("*/metrics.json"))
        if not found:
            raise SystemExit("device check: kedro run --env gpu wrote no metrics.json")
        metrics = json.loads(found[-1].read_text())
    print(f"kedro run --env gpu: finished in {time.perf_counter() - started:.0f} s; metrics.json: "
          f"{json.dumps(metrics)[:600]}", flush=True)
    return metrics


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a CPU dry run")
    parser.add_argument("--precision", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--batches", type=lambda text: [int(b) for b in text.split(",")])
    parser.add_argument("--systems", type=lambda text: text.split(","))
    parser.add_argument("--steps", type=int)
    parser.add_argument("--skip", type=int)
    parser.add_argument("--corpus", help="a corpus path for the kedro run instead of the built-in one")
    parser.add_argument("--kedro-steps", type=int, default=40)
    parser.add_argument("--skip-kedro", action="store_true")
    args = parser.parse_args(argv)
    sizes = ({"layers": 2, "hidden": 64, "vocab": 512, "seq_len": 32} if args.tiny
             else {"layers": 12, "hidden": 768, "vocab": 30522, "seq_len": 128})
    vars(args).update(sizes)
    defaults = {"precision": "fp32" if args.tiny else "bf16", "batches": [8] if args.tiny else [256, 1024],
                "systems": list(SYSTEMS), "steps": 6 if args.tiny else 20, "skip": 3 if args.tiny else 8}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.tiny:
        args.kedro_steps = min(args.kedro_steps, 6)
    unknown = sorted(set(args.systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"--systems: {', '.join(unknown)} not among {', '.join(SYSTEMS)}")
    if not 0 < args.skip < args.steps:
        parser.error(f"--skip: {args.skip} must be between 1 and --steps - 1 ({args.steps - 1})")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device: CUDA is not available here; use --device cpu --tiny for a dry run")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    rows = throughput_table(args)
    print("\n" + markdown(rows, args) + "\n", flush=True)
    if not args.skip_kedro:
        kedro_run(args)


if __name__ == "__main__":
    main()
