"""Subprocess for the kill -9 tests: `python crash_worker.py MODE CHECKPOINT_DIR`.

MODE `train`: trains the tiny model with checkpoints every 3 steps and announces each step, so
the test can SIGKILL it mid-run. MODE `write`: saves one good checkpoint, then starts a second
whose write stalls half-way (announced), so the test can SIGKILL it mid-write.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))

import torch  # noqa: E402
from test_training import repetitive_sequences, setup  # noqa: E402

from bert_mlm.core import training as training_module  # noqa: E402
from bert_mlm.core.masking import MaskingConfig  # noqa: E402

torch.set_num_threads(1)
mode, directory = sys.argv[1], sys.argv[2]

if mode == "train":
    model, ids, config, collator = setup(checkpoint_every=3, checkpoint_dir=directory, max_steps=12)

    def announce(step, _record):
        print(f"step {step}", flush=True)
        if step >= 7:
            time.sleep(3600)  # wait to be killed

    training_module.train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, on_step=announce)
elif mode == "model":
    from kedro.io.core import Version

    from bert_mlm.datasets.pretrained import MaskedLM, MaskedLMDataset

    model, *_ = setup()

    class Tokenizer:
        def save_pretrained(self, directory):
            (Path(directory) / "tokenizer.json").write_text("{")  # half a file
            print("writing", flush=True)
            time.sleep(3600)

    MaskedLMDataset(directory, version=Version(None, "2026-01-02T00.00.00.000Z")).save(MaskedLM(model, Tokenizer()))
else:
    training_module.save_checkpoint(directory, 1, {"weights": torch.ones(4)}, keep=5)
    real_save = torch.save

    def stalling_save(obj, handle, *args, **kwargs):
        handle.write(b"\x80\x02partial")
        handle.flush()
        print("writing", flush=True)
        time.sleep(3600)

    training_module.torch.save = stalling_save
    training_module.save_checkpoint(directory, 2, {"weights": torch.zeros(4)}, keep=5)
