"""The crash tests' worker: ``run(MODE, DIRECTORY, ...)`` in a process that the test kills with SIGKILL.

MODE `train`: trains the tiny model with checkpoints every 3 steps and announces each step, so
the test can SIGKILL it mid-run. MODE `write`: saves one good checkpoint, then starts a second
whose write stalls half-way (announced), so the test can SIGKILL it mid-write. MODE `store`:
encodes the shards in DIRECTORY/documents into a new version of the token store dataset at
DIRECTORY/token_store, stalling (announced) after half of the train split is on disk. MODE `model`:
saves a model version whose tokenizer's write stalls half-way (announced).

tests/reliability/test_faults.py forks it from the test's process (:func:`start`), where torch and
the project are imported already; ``python crash_worker.py MODE DIRECTORY ...`` runs it alone.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "train"))

import torch  # noqa: E402
from test_loop import repetitive_sequences, setup  # noqa: E402

from bert_mlm.config import MaskingConfig  # noqa: E402
from bert_mlm.core.model import checkpoints as checkpoints_module  # noqa: E402
from bert_mlm.core.train import loop as training_module  # noqa: E402


def run(mode: str, directory: str, *extra: str) -> None:
    torch.set_num_threads(1)
    if mode == "train":
        model, ids, config, collator = setup(checkpoint_every=3, checkpoint_dir=directory, max_steps=12)

        def announce(step, _record):
            print(f"step {step}", flush=True)
            if step >= 7:
                time.sleep(3600)  # wait to be killed

        training_module.train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator,
                              on_step=announce)
    elif mode == "store":
        from kedro.io.core import Version

        from bert_mlm.config import DataConfig
        from bert_mlm.core.data.documents import DocumentShards
        from bert_mlm.core.tokens import token_store as store_module
        from bert_mlm.core.tokens.tokenization import EncodingJob
        from bert_mlm.core.tokens.tokenizer import load_tokenizer
        from bert_mlm.datasets.data import TokenStoreDataset

        real_write_split = store_module.TokenStoreWriter.write_split

        def stalling_write_split(self, split, encoded, words=False):
            def half_then_stall():
                for number, item in enumerate(encoded):
                    yield item
                    if number == 1:
                        print("writing", flush=True)
                        time.sleep(3600)

            return real_write_split(self, split, half_then_stall(), words)

        store_module.TokenStoreWriter.write_split = stalling_write_split
        tokenizer = load_tokenizer(extra[0])
        job = EncodingJob(DocumentShards(Path(directory) / "documents"), tokenizer.backend_tokenizer.to_str(),
                          tokenizer.get_vocab(), tokenizer.sep_token_id,
                          DataConfig(workers=1, reuse=False))  # the same job again: written, not reused
        TokenStoreDataset(str(Path(directory) / "token_store"),
                          version=Version(None, "2026-01-02T00.00.00.000Z")).save(job)
    elif mode == "model":
        from kedro.io.core import Version

        from bert_mlm.datasets.pretrained import MaskedLM, MaskedLMDataset

        model, *_ = setup()

        class Tokenizer:
            def save_pretrained(self, directory):
                (Path(directory) / "tokenizer.json").write_text("{")  # half a file
                print("writing", flush=True)
                time.sleep(3600)

        MaskedLMDataset(directory, version=Version(None, "2026-01-02T00.00.00.000Z")).save(
            MaskedLM(model, Tokenizer()))
    else:
        checkpoints_module.save_checkpoint(directory, 1, {"weights": torch.ones(4)}, keep=5)

        def stalling_save(tensors, filename, *args, **kwargs):
            with open(filename, "wb") as handle:
                handle.write(b"partial")
                handle.flush()
                print("writing", flush=True)
                time.sleep(3600)

        checkpoints_module.save_file = stalling_save
        checkpoints_module.save_checkpoint(directory, 2, {"weights": torch.zeros(4)}, keep=5)


class Worker:
    """:func:`run` in a child forked from this process: a new interpreter would spend ~4 s importing torch,
    transformers and the project, which this one has imported. Its announcements come on ``stdout``."""

    def __init__(self, *args: str):
        read, write = os.pipe()
        self.process = multiprocessing.get_context("fork").Process(target=_announcing, args=(write, *args))
        self.process.start()
        os.close(write)
        self.stdout = os.fdopen(read, encoding="utf-8")

    def kill(self) -> None:
        self.process.kill()  # SIGKILL: no clean-up runs

    def wait(self, timeout: float) -> int | None:
        self.process.join(timeout)
        self.stdout.close()
        return self.process.exitcode


def _announcing(write: int, *args: str) -> None:
    os.dup2(write, 1)  # print() in the child writes to the pipe the test reads
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    run(*args)


if __name__ == "__main__":
    run(*sys.argv[1:])
