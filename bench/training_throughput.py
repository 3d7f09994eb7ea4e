"""Training throughput: this project's loop vs Hugging Face `Trainer` + `DataCollatorForLanguageModeling`,
same model config, sequence length, batch, hyperparameters and packed sequences; alternating,
repeated. Also model FLOPs utilisation (MFU) against the fp32 matmul peak measured in the same run.

    python bench/training_throughput.py --corpus ../shared/corpora/gutenberg --layers 4 --hidden 256

Throughput is non-padding tokens per second of wall time from the end of the ``--skip``-th step
to the end of the last one: data loading, masking, forward, backward, clipping and the optimizer
all count. MFU uses the same useful FLOPs for both systems (the head at masked positions only,
`core.model.bert.training_flops_per_token`), so the extra work of a full-vocabulary head earns nothing.
"""

from __future__ import annotations

import argparse
import time

from _data import Prepared, experiment, prepare
from _hf import train_with_hf_trainer
from _timing import Table, alternate_rates, fp32_matmul_peak, median

from bert_mlm.core.model.bert import training_flops_per_token


def run(prepared: Prepared, layers: int = 4, hidden: int = 256, steps: int = 15, skip: int = 3,
        repeats: int = 3, batch_size: int = 32) -> Table:
    setup = experiment(prepared, layers, hidden, steps, batch_size)
    sequences = prepared.sequences["train"]

    def ours() -> float:
        ends, tokens = [], []

        def on_step(step: int, record: dict) -> None:
            ends.append(time.perf_counter())
            tokens.append(record["tokens"])

        setup.train(setup.new_model(), on_step=on_step)
        return sum(tokens[skip:]) / (ends[-1] - ends[skip - 1])

    def hugging_face() -> float:
        ends, tokens, _ = train_with_hf_trainer(setup.new_model(), sequences, prepared.tokenizer, setup.training)
        return sum(tokens[skip:steps]) / (ends[-1] - ends[skip - 1])

    peaks = [fp32_matmul_peak()]
    rates = alternate_rates({"bert-mlm": ours, "HF Trainer + collator": hugging_face}, repeats)
    peaks.append(fp32_matmul_peak())
    peak = max(peaks)  # the higher peak: the conservative MFU
    model_config = setup.new_model().config
    flops = training_flops_per_token(model_config, prepared.max_length, setup.masking.probability)
    table = Table(
        f"Training throughput: {layers} layers x {hidden} hidden, vocab {model_config.vocab_size}, "
        f"batch {batch_size} x {prepared.max_length}",
        ["system", "median non-padding tokens/s", "range", "vs HF Trainer", "model GFLOP/s", "MFU vs fp32 matmul peak"],
    )
    reference = median(rates["HF Trainer + collator"])
    for name, values in rates.items():
        rate = median(values)
        table.rows.append([name, f"{rate:,.0f}", f"{min(values):,.0f}–{max(values):,.0f}",
                           f"**{rate / reference:.2f}x**" if name == "bert-mlm" else "1.00x",
                           f"{rate * flops / 1e9:.1f}", f"**{100 * rate * flops / 1e9 / peak:.0f} %**"])
    table.notes = [
        f"{steps} steps per run, the first {skip} excluded, {repeats} alternating repeats. fp32 matmul peak "
        f"(best of 1024/2048/3072 squares, median of 5) measured before and after: "
        f"{peaks[0]:.0f} and {peaks[1]:.0f} GFLOP/s; MFU uses {peak:.0f}. Model FLOPs per token: {flops / 1e6:.1f} M.",
    ]
    table.data = {"rates": rates, "peaks": peaks, "flops_per_token": flops}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(run(prepare(args.corpus), args.layers, args.hidden, args.steps, repeats=args.repeats).markdown())


if __name__ == "__main__":
    main()
