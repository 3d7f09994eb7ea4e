"""The performance levers tried, each measured A/B on the same batches, alternating, repeated.

    python bench/levers.py --corpus ../shared/corpora/gutenberg --layers 4 --hidden 256

Each lever is one training step (forward + backward + AdamW) of the same model on the same
packed Gutenberg batches, with only that one thing changed; the bucketing lever instead runs the
real training loop on unpacked (one paragraph per sequence) data, where padding exists.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import torch
from _data import Prepared, experiment, prepare
from _timing import Table, alternate_rates, median

from bert_mlm.core.model.bert import MaskedPositionsMLM, masked_lm_loss
from bert_mlm.core.model.masking import mask_generator, mask_tokens
from bert_mlm.core.tokens.batches import batch_order, padding_efficiency
from bert_mlm.core.tokens.sequences import build_sequences


class StepSystem:
    """One training-step variant: built (and warmed up) on first use, then timed per call."""

    def __init__(self, base, batches, *, attention="eager", fused=True, compiled=False,
                 full_head=False, threads=None, steps=4) -> None:
        self.base, self.batches = base, batches
        self.options = {"attention": attention, "fused": fused, "compiled": compiled, "full_head": full_head}
        self.threads, self.steps, self.ready, self.setup_seconds = threads, steps, False, 0.0

    def build(self) -> None:
        setup = replace(
            self.base, model_config=self.base.model_config.replace(attn_implementation=self.options["attention"])
        )
        self.model = setup.new_model()
        self.model.train()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=self.options["fused"],
                                           foreach=None if self.options["fused"] else True)
        sparse = MaskedPositionsMLM(self.model)
        self.forward = torch.compile(sparse) if self.options["compiled"] else sparse
        started = time.perf_counter()
        for batch in self.batches[:3]:  # warm-up (and compilation) outside the timing
            self.one_step(*batch)
        self.setup_seconds = time.perf_counter() - started
        self.ready = True

    def one_step(self, inputs, attention, labels) -> None:
        if self.options["full_head"]:
            loss = self.model(input_ids=inputs, attention_mask=attention, labels=labels).loss
        else:
            loss_sum, _, count = masked_lm_loss(self.forward, inputs, attention, labels)
            loss = loss_sum / count
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def __call__(self) -> float:
        threads = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            if not self.ready:
                self.build()
            started = time.perf_counter()
            tokens = 0
            for inputs, attention, labels in self.batches[3:3 + self.steps]:
                self.one_step(inputs, attention, labels)
                tokens += int(attention.sum())
            return tokens / (time.perf_counter() - started)
        finally:
            torch.set_num_threads(threads)


def masked_batches(setup, sequences, count: int, batch_size: int, seed: int = 0):
    ids, collator = setup.token_ids, setup.collator
    rng = np.random.default_rng(seed)
    batches = []
    for index in range(count):
        batch = collator([sequences[i] for i in rng.choice(len(sequences), batch_size, replace=False)])
        inputs, labels = mask_tokens(batch["input_ids"], batch["special_tokens_mask"], ids.mask, ids.replacement,
                                     setup.masking, mask_generator(0, 0, index))
        batches.append((inputs, batch["attention_mask"], labels))
    return batches


def ab_table(title: str, systems: dict[str, StepSystem], repeats: int, note: str, kept: str) -> Table:
    rates = alternate_rates(systems, repeats)
    reference = list(systems)[-1]
    table = Table(
        title, ["variant", "median tokens/s", "range", "vs " + reference, "set-up s"], notes=[note, f"Kept: {kept}"]
    )
    for name, values in rates.items():
        table.rows.append([name, f"{median(values):,.0f}", f"{min(values):,.0f}–{max(values):,.0f}",
                           f"{median(values) / median(rates[reference]):.2f}x", f"{systems[name].setup_seconds:.1f}"])
    table.data = {"rates": rates}
    return table


def bucketing_table(prepared: Prepared, layers: int, hidden: int, steps: int, repeats: int) -> Table:
    tokenizer = prepared.tokenizer
    documents = build_sequences(prepared.token_ids["train"], "document", prepared.max_length,
                                tokenizer.cls_token_id, tokenizer.sep_token_id)
    base = experiment(prepared, layers, hidden, steps)
    base = replace(base, sequences={"train": documents})

    def run(bucketed: bool):
        def rate() -> float:
            setup = replace(base, training=base.training.replace(bucketing=bucketed))
            result = setup.train(setup.new_model())
            history = result.history.iloc[2:]
            return history["tokens"].sum() / history["seconds"].sum()
        return rate

    rates = alternate_rates({"length-bucketed batches": run(True), "random batches": run(False)}, repeats)
    lengths = [len(s) for s in documents]
    efficiency = {
        name: padding_efficiency(
            lengths, batch_order(lengths, 32, torch.Generator().manual_seed(0), bucketed=flag), base.collator
        )
        for name, flag in (("length-bucketed batches", True), ("random batches", False))
    }
    table = Table(
        f"Lever: length bucketing, one paragraph per sequence ({len(documents):,} sequences, mean length "
        f"{np.mean(lengths):.0f})",
        ["variant", "median non-padding tokens/s", "range", "vs random batches", "padding efficiency"],
        notes=[f"The training loop itself, {steps} steps ({repeats} alternating repeats), dynamic padding to x8. "
               "Packed sequences (the default `sequences.mode`) have no padding at all.",
               "Kept: bucketing on (`training.bucketing: true`) for `sequences.mode: document`."],
    )
    for name, values in rates.items():
        table.rows.append([name, f"{median(values):,.0f}", f"{min(values):,.0f}–{max(values):,.0f}",
                           f"{median(values) / median(rates['random batches']):.2f}x", f"{efficiency[name]:.1%}"])
    table.data = {"rates": rates, "padding_efficiency": efficiency}
    return table


def run(prepared: Prepared, layers: int = 4, hidden: int = 256, repeats: int = 3, steps: int = 4,
        compile_lever: bool = True) -> list[Table]:
    base = experiment(prepared, layers, hidden, 10)
    batches = masked_batches(base, prepared.sequences["train"], 3 + steps, 32)
    size = f"{layers} layers x {hidden} hidden, batch 32 x {prepared.max_length}"
    note = f"{size}; {steps} timed steps per call after 3 warm-up steps, {repeats} alternating repeats."

    def system(**options) -> StepSystem:
        return StepSystem(base, batches, steps=steps, **options)

    tables = [
        ab_table(
            "Lever: MLM head at masked positions only vs at every position",
            {
                "head at masked positions (bert-mlm)": system(),
                "head at every position (BertForMaskedLM(labels=))": system(full_head=True),
            },
            repeats,
            note,
            "masked positions only (`core.model.bert.MaskedPositionsMLM`).",
        ),
        ab_table(
            "Lever: fused AdamW vs for-each AdamW",
            {"fused AdamW": system(fused=True), "for-each AdamW (torch default)": system(fused=False)},
            repeats,
            note,
            "fused, on CPU and CUDA (`core.model.optim.build_optimizer`).",
        ),
        ab_table(
            "Lever: attention implementation",
            {"sdpa": system(attention="sdpa"), "eager": system(attention="eager")},
            repeats,
            note,
            "`model.attn_implementation: eager` on CPU (a tie here); `sdpa` in conf/gpu.",
        ),
        ab_table(
            "Lever: threads",
            {"2 threads": system(threads=2), "1 thread": system(threads=1)},
            repeats,
            note,
            "torch's default (one per core).",
        ),
    ]
    if compile_lever:
        tables.append(
            ab_table(
                "Lever: torch.compile (inductor) vs eager",
                {"torch.compile": system(compiled=True), "eager": system()},
                repeats,
                note + " Set-up includes compilation.",
                "eager: the gain does not pay for the compile time of runs of minutes.",
            )
        )
    tables.append(bucketing_table(prepared, layers, hidden, 12, repeats))
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="../shared/corpora/gutenberg")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    for table in run(prepare(args.corpus), args.layers, args.hidden, args.repeats, compile_lever=not args.no_compile):
        print(table.markdown())


if __name__ == "__main__":
    main()
