"""CUDA checks for a GPU machine: AMP steps (bf16, fp16 + GradScaler), tokens/s and MFU.

    python scripts/cuda_checks.py                       # BERT-base, seq 128, batch 64, on CUDA
    python scripts/cuda_checks.py --device cpu --layers 1 --hidden 64 --steps 3   # dry run anywhere

For each precision it runs real training steps of this project's loop on random token data
(the throughput of the model does not depend on the token values), checks the loss is finite and
falls, that fp16 really uses a GradScaler (scale > 1) and that clipping sees unscaled gradients,
and reports non-padding tokens/s and model FLOPs utilisation against the measured peak of a
large matmul in the same precision. Prints one JSON object per precision and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import torch
from transformers import BertConfig, BertForMaskedLM

from bert_mlm.config import MaskingConfig, TrainingConfig
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.sequences import Collator
from bert_mlm.core.train.loop import train

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def matmul_peak_flops(device: torch.device, dtype: torch.dtype, size: int = 8192, repeats: int = 20) -> float:
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 2 * size**3 * repeats / (time.perf_counter() - started)


def training_flops_per_token(config: BertConfig, seq_len: int, mask_probability: float) -> float:
    """6 x (matmul parameters) per token for the encoder, attention scores, and the MLM head at the
    masked positions only (as this project computes it)."""
    h, i, layers, v = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    encoder = layers * (4 * h * h + 2 * h * i)
    attention = layers * 2 * seq_len * h
    head = mask_probability * (h * h + h * v)
    return 6 * (encoder + attention + head)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--precisions", default="bf16,fp16,fp32")
    parser.add_argument("--attn", default="sdpa")
    args = parser.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    config = BertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64), intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.seq_len), attn_implementation=args.attn, pad_token_id=0,
    )
    rng = np.random.default_rng(0)
    sequences = [
        np.concatenate(([2], rng.integers(5, args.vocab, args.seq_len - 2), [3])).astype(np.int32)
        for _ in range(args.batch_size * (args.steps + 5))
    ]
    ids = TokenIds(pad=0, mask=4, special=[0, 1, 2, 3, 4], replacement=torch.arange(5, args.vocab))
    collator = Collator(0, ids.special, args.seq_len, "static")
    rows = []
    for precision in args.precisions.split(","):
        if device.type == "cuda" and precision == "bf16" and not torch.cuda.is_bf16_supported():
            rows.append({"precision": precision, "skipped": "bf16 not supported"})
            continue
        torch.manual_seed(0)
        model = BertForMaskedLM(config)
        training = TrainingConfig(
            max_steps=args.steps, batch_size=args.batch_size, learning_rate=1e-4, warmup_steps=2,
            precision=precision, device=str(device), progress=False, bucketing=False,
        )
        result = train(model, sequences, ids, MaskingConfig(), training, collator)
        history = result.history.iloc[min(3, len(result.history) - 1):]  # skip warm-up steps
        tokens_per_second = history["tokens"].sum() / history["seconds"].sum()
        peak = (
            matmul_peak_flops(device, DTYPES[precision])
            if device.type == "cuda"
            else matmul_peak_flops(device, torch.float32, 2048, 5)
        )
        model_flops = training_flops_per_token(config, args.seq_len, 0.15) * tokens_per_second
        rows.append(
            {
                "precision": precision,
                "device": torch.cuda.get_device_name(device)
                if device.type == "cuda"
                else platform.processor() or "cpu",
                "tokens_per_second": round(float(tokens_per_second)),
                "model_tflops": round(model_flops / 1e12, 2),
                "matmul_peak_tflops": round(peak / 1e12, 1),
                "mfu": round(model_flops / peak, 3),
                "first_loss": round(float(result.history["loss"].iloc[0]), 3),
                "last_loss": round(float(result.history["loss"].iloc[-1]), 3),
                "finite": bool(np.isfinite(result.history["loss"]).all()),
                "loss_scale": float(result.history["loss_scale"].iloc[-1]),
                "peak_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
                if device.type == "cuda"
                else None,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
    print("\n| precision | tokens/s | model TFLOP/s | peak TFLOP/s | MFU | loss first → last | scale |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        if "skipped" in row:
            print(f"| {row['precision']} | skipped: {row['skipped']} | | | | | |")
            continue
        print(
            f"| {row['precision']} | {row['tokens_per_second']:,} | {row['model_tflops']} "
            f"| {row['matmul_peak_tflops']} | "
            f"{row['mfu']:.1%} | {row['first_loss']} → {row['last_loss']} | {row['loss_scale']:.0f} |"
        )
    failures = [r for r in rows if "skipped" not in r and not r["finite"]]
    if failures:
        raise SystemExit(f"non-finite loss with {[r['precision'] for r in failures]}")
    fp16 = [r for r in rows if r.get("precision") == "fp16" and "skipped" not in r]
    if fp16 and device.type == "cuda" and fp16[0]["loss_scale"] <= 1:
        raise SystemExit("fp16 ran without an active GradScaler")


if __name__ == "__main__":
    main()
