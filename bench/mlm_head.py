"""Training-step time: the MLM head at masked positions only (this project) vs at every position
(`BertForMaskedLM(labels=...)`, what the HF recipe runs). Same model, batch and masks; alternating.

    python bench/mlm_head.py --hidden 128 --layers 2 --vocab 8192 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import BertConfig, BertForMaskedLM

from bert_mlm.core.model import MaskedPositionsMLM, masked_lm_loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=max(1, args.hidden // 64), intermediate_size=4 * args.hidden,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = BertForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    inputs = torch.randint(5, args.vocab, (args.batch_size, args.seq_len))
    attention = torch.ones_like(inputs)
    labels = torch.where(torch.rand(inputs.shape) < 0.15, inputs, torch.full_like(inputs, -100))
    sparse = MaskedPositionsMLM(model)

    def masked_only() -> float:
        loss_sum, _, count = masked_lm_loss(sparse, inputs, attention, labels)
        (loss_sum / count).backward()
        return float(loss_sum.detach() / count)

    def every_position() -> float:
        loss = model(input_ids=inputs, attention_mask=attention, labels=labels).loss
        loss.backward()
        return float(loss)

    assert abs(masked_only() - every_position()) < 1e-4, "both compute the same loss"
    optimizer.zero_grad()
    systems = {"head at masked positions (bert-mlm)": masked_only, "head at every position (HF)": every_position}
    seconds = {name: [] for name in systems}
    for _ in range(args.repeats):
        for name, step in systems.items():
            started = time.perf_counter()
            for _ in range(args.steps):
                step()
                optimizer.step()
                optimizer.zero_grad()
            seconds[name].append((time.perf_counter() - started) / args.steps)
    tokens = args.batch_size * args.seq_len
    reference = statistics.median(seconds["head at every position (HF)"])
    print(f"model: {args.layers} layers x {args.hidden} hidden, vocab {args.vocab}; batch {args.batch_size} x {args.seq_len}\n")
    print("| training step | median s | tokens/s | speed-up |")
    print("|---|---|---|---|")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.3f} | {tokens / median:,.0f} | {reference / median:.2f}x |")


if __name__ == "__main__":
    main()
