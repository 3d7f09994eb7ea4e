"""Case 1 of the reliability pass: ``training.resume`` continues only a checkpoint of the very same
run, and a finished run is not "resumed" into a new model version."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "train"))
from test_loop import repetitive_sequences, setup, validation_on  # noqa: E402

from bert_mlm.config import MaskingConfig  # noqa: E402
from bert_mlm.core.model.checkpoints import (  # noqa: E402
    LEGACY_FILE,
    MANIFEST_FILE,
    RUN_FILE,
    TENSORS_FILE,
    list_checkpoints,
    read_checkpoint,
    run_folders,
)
from bert_mlm.core.train.loop import train  # noqa: E402
from bert_mlm.errors import UserError  # noqa: E402


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
        ({"precision": "bf16"}, r"precision 'fp32' -> 'bf16'"),  # fp32 and bf16 steps give other weights
    ],
    ids=["mask probability", "seed", "corpus", "learning rate", "precision"],
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


@pytest.mark.parametrize(("eval_every", "crash_at", "checkpoint"), [(3, 10, 8), (4, 6, 4)],
                         ids=["best weights stored apart", "best is the checkpoint's own weights"])
def test_a_resumed_run_validates_and_keeps_the_best_as_an_uninterrupted_one(tmp_path, eval_every, crash_at,
                                                                            checkpoint):
    """Validation rows are in the checkpoint's history and the best weights travel with it: an
    interrupted and resumed run has the same history, validation included, and keeps the same step."""
    settings = {"checkpoint_every": 4, "eval_every": eval_every, "keep_best": True, "learning_rate": 1e-2,
                "schedule": "constant_with_warmup"}
    validation = validation_on(repetitive_sequences(24, seed=1))
    straight, ids, config, collator = setup(checkpoint_dir=str(tmp_path / "straight"), **settings)
    uninterrupted = train(straight, repetitive_sequences(), ids, MaskingConfig(), config, collator,
                          validation=validation)

    def crash(step, _record):
        if step == crash_at:
            raise KeyboardInterrupt("simulated crash")

    model, ids, config, collator = setup(checkpoint_dir=str(tmp_path / "crashed"), **settings)
    with pytest.raises(KeyboardInterrupt):
        train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, on_step=crash,
              validation=validation)
    model, ids, config, collator = setup(checkpoint_dir=str(tmp_path / "crashed"), resume=True, **settings)
    resumed = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, validation=validation)
    assert resumed.resumed_from_step == checkpoint
    timing = ["seconds", "tokens_per_second", "valid_seconds"]
    pd.testing.assert_frame_equal(resumed.history.drop(columns=timing), uninterrupted.history.drop(columns=timing))
    validated = list(resumed.history.dropna(subset=["valid_loss"])["step"])
    assert validated == sorted({*range(eval_every, 13, eval_every), 12})
    assert resumed.kept_step == uninterrupted.kept_step < 12
    for key, value in straight.state_dict().items():
        assert torch.equal(value, model.state_dict()[key]), key


def test_runs_do_not_share_a_checkpoint_folder(tmp_path):
    run(tmp_path, max_steps=4)
    run(tmp_path, max_steps=4, seed=3)
    folders = run_folders(tmp_path)
    assert len(folders) == 2
    seeds = sorted(json.loads((folder / RUN_FILE).read_text())["seed"] for folder in folders)
    assert seeds == [3, 42]
    for folder in folders:
        state = read_checkpoint(list_checkpoints(folder)[-1])
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


class WritesAFile:
    """Unpickling this creates ``path``: a stand-in for any code a pickled checkpoint can run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


def plant_pickle(step_folder: Path, marker: Path) -> None:
    with open(step_folder / LEGACY_FILE, "wb") as handle:
        torch.save({"model": WritesAFile(marker), "step": 4}, handle)


def test_a_pickled_checkpoint_of_this_run_is_refused_without_running_it(tmp_path):
    checkpoints, marker = tmp_path / "checkpoints", tmp_path / "pwned"
    run(checkpoints, max_steps=4)
    (step,) = list_checkpoints(run_folders(checkpoints)[-1])
    for name in (MANIFEST_FILE, TENSORS_FILE):
        (step / name).unlink()
    plant_pickle(step, marker)
    with pytest.raises(
        UserError, match=rf"training\.resume: '{step}' holds a checkpoint of the earlier pickled format"
    ):
        run(checkpoints, max_steps=8, resume=True)
    assert not marker.exists()


def test_a_pickle_beside_a_checkpoint_is_never_read(tmp_path):
    checkpoints, marker = tmp_path / "checkpoints", tmp_path / "pwned"
    run(checkpoints, max_steps=4)
    (step,) = list_checkpoints(run_folders(checkpoints)[-1])
    plant_pickle(step, marker)
    _, result = run(checkpoints, max_steps=8, resume=True)
    assert result.resumed_from_step == 4 and not marker.exists()


def _uninterrupted_and_crashed_at_step_10(tmp_path):
    """A 12-step run straight through, and the same run crashed at step 10 with checkpoints every 4
    steps (steps 4 and 8 left): the straight run's result, the checkpoint folder and its newest checkpoint."""
    straight, _ = run(tmp_path / "straight", max_steps=12)
    checkpoints = tmp_path / "checkpoints"
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=str(checkpoints), max_steps=12)

    def crash(step, _record):
        if step == 10:
            raise KeyboardInterrupt("simulated crash")

    with pytest.raises(KeyboardInterrupt):
        train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, on_step=crash)
    return straight, checkpoints, list_checkpoints(run_folders(checkpoints)[-1])[-1]


@pytest.mark.parametrize("damaged", [TENSORS_FILE, MANIFEST_FILE])
def test_a_truncated_newest_checkpoint_is_named_and_the_previous_one_resumed(tmp_path, caplog, damaged):
    straight, checkpoints, newest = _uninterrupted_and_crashed_at_step_10(tmp_path)
    assert newest.name == "step-00000008"
    data = (newest / damaged).read_bytes()
    (newest / damaged).write_bytes(data[: len(data) // 2])
    resumed, result = run(checkpoints, max_steps=12, resume=True)
    assert result.resumed_from_step == 4
    assert str(newest / damaged) in caplog.text and "resuming from the previous complete one" in caplog.text
    for key, value in straight.state_dict().items():  # the exact resume holds from the older checkpoint too
        assert torch.equal(value, resumed.state_dict()[key]), key


def _edit(manifest: dict, change: str) -> object:
    """One way an edited or foreign checkpoint.json differs from what was written."""
    if change == "files as a list":
        manifest["files"] = list(manifest["files"])
    elif change == "no step":
        del manifest["state"]["step"]
    elif change == "step as text":
        manifest["state"]["step"] = "eight"
    elif change == "size missing":
        del manifest["files"][TENSORS_FILE]["bytes"]
    elif change == "model weights left out":
        manifest["state"]["model"] = {}
    elif change == "a list, not a mapping":
        return [manifest]
    elif change == "a tensor reference to nowhere":
        manifest["state"]["model"][next(iter(manifest["state"]["model"]))] = {"__tensor__": "99999"}
    return manifest


@pytest.mark.parametrize("change", ["files as a list", "no step", "step as text", "size missing",
                                    "model weights left out", "a list, not a mapping", "a tensor reference to nowhere"])
def test_an_altered_checkpoint_json_is_named_and_the_previous_one_resumed(tmp_path, caplog, change):
    """A truncated checkpoint.json fell back; one whose structure was altered gave a traceback that did not name the
    file. Any unreadable manifest is now named in a warning, and the previous checkpoint resumes exactly."""
    straight, checkpoints, newest = _uninterrupted_and_crashed_at_step_10(tmp_path)
    manifest = newest / MANIFEST_FILE
    manifest.write_text(json.dumps(_edit(json.loads(manifest.read_text()), change)))
    resumed, result = run(checkpoints, max_steps=12, resume=True)
    assert result.resumed_from_step == 4
    warning = next(m for m in caplog.messages if "resuming from the previous complete one" in m)
    assert str(newest) in warning, warning
    for key, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[key]), key


def test_a_changed_tensor_byte_is_caught_by_the_digest(tmp_path, caplog):
    run(tmp_path, max_steps=4)
    (step,) = list_checkpoints(run_folders(tmp_path)[-1])
    data = bytearray((step / TENSORS_FILE).read_bytes())
    data[-1] ^= 0xFF
    (step / TENSORS_FILE).write_bytes(bytes(data))
    with pytest.raises(UserError, match=r"no intact checkpoint .*does not match the digest in its manifest"):
        run(tmp_path, max_steps=8, resume=True)


def test_no_unpickling_in_the_source():
    source = Path(__file__).resolve().parents[2] / "src"
    offending = [
        f"{path.relative_to(source)}:{number}: {line.strip()}"
        for path in source.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"weights_only\s*=\s*False|pickle\.loads?\(|all_gather_object|broadcast_object_list|"
                     r"(?<![.\w])torch\.load\((?!.*weights_only\s*=\s*True)", line)
    ]
    assert offending == []
