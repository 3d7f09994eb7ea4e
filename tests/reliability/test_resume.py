"""Case 1 of the reliability pass: ``training.resume`` continues only a checkpoint of the very same
run, and a finished run is not "resumed" into a new model version."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_training import repetitive_sequences, setup  # noqa: E402

from bert_mlm.core.checkpoints import RUN_FILE, list_checkpoints, run_folders  # noqa: E402
from bert_mlm.core.errors import UserError  # noqa: E402
from bert_mlm.core.masking import MaskingConfig  # noqa: E402
from bert_mlm.core.training import train  # noqa: E402


def run(tmp_path, masking=None, sequences=None, **overrides):
    model, ids, config, collator = setup(**{"checkpoint_every": 4, "checkpoint_dir": str(tmp_path), **overrides})
    return model, train(model, sequences or repetitive_sequences(), ids, masking or MaskingConfig(), config, collator)


def test_a_finished_run_is_not_resumed_into_a_new_version(tmp_path):
    run(tmp_path, max_steps=8)
    with pytest.raises(UserError, match=r"already completed this run's 8 steps .*nothing is left to train and no new "
                                         r"model version is written"):
        run(tmp_path, max_steps=8, resume=True)
    # Raising the budget continues the same run.
    _, longer = run(tmp_path, max_steps=12, resume=True)
    assert longer.resumed_from_step == 8 and len(longer.history) == 12


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"masking": MaskingConfig(probability=0.3)}, r"masking\.probability 0\.15 -> 0\.3"),
        ({"seed": 7}, r"seed 42 -> 7"),
        ({"sequences": repetitive_sequences(seed=1)}, r"data '[0-9a-f]+' -> '[0-9a-f]+'"),
        ({"learning_rate": 1e-3}, r"optimisation\.learning_rate 0\.003 -> 0\.001"),
    ],
    ids=["mask probability", "seed", "corpus", "learning rate"],
)
def test_resume_refuses_another_runs_checkpoint_and_says_what_differs(tmp_path, change, named):
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=str(tmp_path), max_steps=12)

    def crash(step, _record):
        if step == 6:
            raise KeyboardInterrupt("simulated crash")

    with pytest.raises(KeyboardInterrupt):
        train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, on_step=crash)
    with pytest.raises(UserError, match=rf"training\.resume: no checkpoint of this run .*what differs: .*{named}.*"
                                        r"Set training\.resume=false to start fresh"):
        run(tmp_path, resume=True, **change)
    # Asked to start fresh, it does, in a folder of its own: the crashed run's checkpoint is kept.
    _, fresh = run(tmp_path, resume=False, **change)
    assert fresh.resumed_from_step == 0 and len(run_folders(tmp_path)) == 2
    # And the crashed run still resumes exactly where it was.
    _, resumed = run(tmp_path, resume=True, max_steps=12)
    assert resumed.resumed_from_step == 4


def test_runs_do_not_share_a_checkpoint_folder(tmp_path):
    run(tmp_path, max_steps=4)
    run(tmp_path, max_steps=4, seed=3)
    folders = run_folders(tmp_path)
    assert len(folders) == 2
    seeds = sorted(json.loads((folder / RUN_FILE).read_text())["seed"] for folder in folders)
    assert seeds == [3, 42]
    for folder in folders:
        state = torch.load(list_checkpoints(folder)[-1] / "checkpoint.pt", weights_only=False)
        assert state["fingerprint"] == json.loads((folder / RUN_FILE).read_text())


def test_resume_with_an_empty_checkpoint_folder_starts_fresh(tmp_path):
    _, result = run(tmp_path / "new", max_steps=4, resume=True)
    assert result.resumed_from_step == 0 and len(result.history) == 4


def test_checkpoints_of_an_earlier_layout_are_not_resumed_blindly(tmp_path):
    run(tmp_path, max_steps=4)
    (folder,) = run_folders(tmp_path)
    list_checkpoints(folder)[-1].rename(tmp_path / "step-00000004")  # as written before run folders
    with pytest.raises(UserError, match="written without a run fingerprint"):
        run(tmp_path, max_steps=8, resume=True)


def test_the_fingerprint_does_not_change_with_bookkeeping(tmp_path):
    run(tmp_path, max_steps=4, progress=False, keep_checkpoints=3)
    _, result = run(tmp_path, max_steps=8, resume=True, keep_checkpoints=1, checkpoint_every=2)
    assert result.resumed_from_step == 4
