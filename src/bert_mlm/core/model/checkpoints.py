"""Training checkpoints on disk, written atomically, one folder per run
(``checkpoint_dir/run-<digest of its fingerprint>/step-NNNNNNNN/``: core/model/resume.py).

Nothing is unpickled: a checkpoint is ``checkpoint.safetensors`` (the tensors) and
``checkpoint.json`` (the fingerprint, the tensor file's digest, and the rest of the state with
references to the tensors), both checked before a tensor is read. A damaged newest checkpoint is
named in a warning and the previous one (``training.keep_checkpoints``) is used; pickled
``checkpoint.pt`` files of the earlier format are refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bert_mlm.core.common.files import written_then_renamed
from bert_mlm.core.common.state_codec import flatten, unflatten
from bert_mlm.core.model.construction import MODEL_LOCK
from bert_mlm.errors import UserError, first_line

logger = logging.getLogger(__name__)

MANIFEST_FILE = "checkpoint.json"  # fingerprint, file digests, the state's structure
TENSORS_FILE = "checkpoint.safetensors"
LEGACY_FILE = "checkpoint.pt"  # the earlier, pickled format: refused
FORMAT = 2
RUN_FILE = "run.json"  # the fingerprint, readable, beside the run's checkpoints


def checkpoint_bytes(bert_config, keep_best: bool = False) -> int:
    """About what one checkpoint of a ``BertConfig``'s model takes: its state dict in fp32 (tied
    weights twice), AdamW's two moments, and with ``keep_best`` the best step's weights again."""
    from transformers import BertForMaskedLM

    with MODEL_LOCK, torch.device("meta"):  # shapes only: nothing allocated, nothing initialised
        model = BertForMaskedLM(bert_config)
    weights = sum(t.numel() for t in model.state_dict().values())
    return 4 * weights * (2 if keep_best else 1) + 8 * sum(p.numel() for p in model.parameters())


def check_checkpoint_dir(directory: str | os.PathLike, needed: int) -> None:
    """Before training: ``training.checkpoint_dir`` can be written and has room (disk and file-size
    limit) for a checkpoint of ``needed`` bytes, or one line says what to change. A real write in
    the nearest existing folder decides, not the permission bits (a read-only mount, an ACL)."""
    import tempfile

    path = Path(directory).expanduser()
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise UserError(f"training.checkpoint_dir: {str(directory)!r} cannot be a folder: {str(existing)!r} is a file")
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".bert-mlm-write-test-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise UserError(f"training.checkpoint_dir: {str(directory)!r} cannot be written ({error.strerror} in "
                        f"{str(existing)!r}); point training.checkpoint_dir to a writable folder, or set "
                        "training.checkpoint_every=0 to train without checkpoints") from error
    free = shutil.disk_usage(existing).free
    if free < needed:
        raise UserError(f"training.checkpoint_dir: {str(directory)!r} has {free / 1e9:,.2f} GB free, but one "
                        f"checkpoint of this model needs about {needed / 1e9:,.2f} GB (fp32 weights and AdamW's two "
                        "moments); free space there, point training.checkpoint_dir to a larger disk, or set "
                        "training.checkpoint_every=0")
    try:
        import resource
    except ImportError:  # Windows: no file-size limit to read
        return
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and limit < needed:
        raise UserError("training.checkpoint_dir: the file-size limit of this process (ulimit -f) is "
                        f"{limit / 1e6:,.1f} MB, but a checkpoint of this model writes a file of about "
                        f"{needed / 1e6:,.1f} MB; raise the limit (ulimit -f unlimited) or set "
                        "training.checkpoint_every=0")


def run_folder(root: str | os.PathLike, fingerprint: dict) -> Path:
    key = json.dumps(fingerprint, sort_keys=True, default=str)
    return Path(root) / f"run-{hashlib.blake2b(key.encode(), digest_size=6).hexdigest()}"


def checkpoint_path(directory: str | os.PathLike, step: int) -> Path:
    return Path(directory) / f"step-{step:08d}"


def list_checkpoints(directory: str | os.PathLike) -> list[Path]:
    """Checkpoints of one run folder, oldest first (a directory appears only by an atomic rename),
    the earlier pickled format included (so that it is refused rather than ignored)."""
    root = Path(directory)
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("step-*")
                  if p.is_dir() and ((p / MANIFEST_FILE).is_file() or (p / LEGACY_FILE).is_file()))


def run_folders(root: str | os.PathLike) -> list[Path]:
    """Run folders under ``training.checkpoint_dir`` that hold a complete checkpoint, newest last."""
    newest = {p: found[-1] for p in Path(root).glob("run-*") if (found := list_checkpoints(p))}
    return sorted(newest, key=lambda p: newest[p].stat().st_mtime)


class DamagedCheckpoint(Exception):
    """A checkpoint file is truncated or does not match its digest; the message names the file."""


def file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def _as_json(value) -> object:
    """``value`` as it reads back from JSON (tuples become lists), to compare fingerprints."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def save_checkpoint(directory: str | os.PathLike, step: int, state: dict, keep: int,
                    fingerprint: dict | None = None) -> Path:
    """Written to a temporary directory, then renamed: a crash leaves the previous one intact, and a
    failed write (full disk, file-size limit) is one ``UserError`` naming the checkpoint."""
    structure, tensors = flatten(state)
    needed = sum(t.numel() * t.element_size() for t in tensors.values())
    artifact = f"training.checkpoint_dir (the checkpoint of step {step}; the previous one is kept)"
    with written_then_renamed(checkpoint_path(directory, step), artifact=artifact, needed=needed) as temporary:
        temporary.mkdir()
        save_file(tensors, temporary / TENSORS_FILE)
        manifest = {"format": FORMAT, "fingerprint": _as_json(fingerprint), "state": structure,
                    "files": {TENSORS_FILE: {"blake2b": file_digest(temporary / TENSORS_FILE),
                                             "bytes": (temporary / TENSORS_FILE).stat().st_size}}}
        (temporary / MANIFEST_FILE).write_text(json.dumps(manifest, sort_keys=True))
    if fingerprint is not None and not (Path(directory) / RUN_FILE).is_file():
        with written_then_renamed(Path(directory) / RUN_FILE, artifact="training.checkpoint_dir") as temporary:
            temporary.write_text(json.dumps(fingerprint, indent=2, sort_keys=True, default=str))
    for old in list_checkpoints(directory)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return checkpoint_path(directory, step)


def read_checkpoint(folder: str | os.PathLike, fingerprint: dict | None = None) -> dict:
    """One checkpoint's state (with its ``fingerprint``), the fingerprint and every file's size and
    digest checked before a tensor is read. :class:`DamagedCheckpoint` for a truncated or altered
    file, ``UserError`` for another run's checkpoint or the earlier pickled format."""
    folder = Path(folder)
    manifest_file = folder / MANIFEST_FILE
    if not manifest_file.is_file():
        raise UserError(f"training.resume: {str(folder)!r} holds a checkpoint of the earlier pickled format "
                        f"({LEGACY_FILE}), which is not loaded because unpickling a file can run any code in it; set "
                        "training.resume=false to start fresh (or move that folder away).")
    try:
        manifest = json.loads(manifest_file.read_text())
        files, structure = _manifest_parts(manifest)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise DamagedCheckpoint(f"{str(manifest_file)!r} is unreadable ({type(error).__name__}: {error})") from error
    if fingerprint is not None and manifest.get("fingerprint") != _as_json(fingerprint):
        changed = "; ".join(differences(manifest.get("fingerprint") or {}, _as_json(fingerprint)))
        raise UserError(f"training.resume: {str(folder)!r} is another run's checkpoint; what differs: {changed}")
    for name, expected in files.items():
        path = folder / name
        size = path.stat().st_size if path.is_file() else None
        if size != expected["bytes"]:
            raise DamagedCheckpoint(f"{str(path)!r} has {size} bytes, its manifest says {expected['bytes']} "
                                    "(truncated?)")
        if file_digest(path) != expected["blake2b"]:
            raise DamagedCheckpoint(f"{str(path)!r} does not match the digest in its manifest")
    try:
        tensors = load_file(folder / TENSORS_FILE)
    except (OSError, SafetensorError) as error:
        raise DamagedCheckpoint(f"{str(folder / TENSORS_FILE)!r} is unreadable ({error})") from error
    try:
        state = unflatten(structure, tensors)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RuntimeError) as error:
        raise DamagedCheckpoint(f"{str(manifest_file)!r} does not describe a checkpoint's state "
                                f"({type(error).__name__}: {error})") from error
    return {**state, "fingerprint": manifest.get("fingerprint")}


def _manifest_parts(manifest) -> tuple[dict, dict]:
    """The manifest's file list and state structure, or a ``TypeError``/``KeyError`` saying
    which part is not what :func:`save_checkpoint` writes (an edited or foreign file)."""
    files, structure = manifest["files"], manifest["state"]
    if set(files) != {TENSORS_FILE} or not isinstance(structure, dict):
        raise TypeError(f"its files are {sorted(files)!r} and its state a {type(structure).__name__}, not "
                        f"[{TENSORS_FILE!r}] and a mapping")
    entry = files[TENSORS_FILE]
    if not isinstance(entry.get("bytes"), int) or not isinstance(entry.get("blake2b"), str):
        raise TypeError(f"the entry of {TENSORS_FILE} lacks its size or digest: {entry!r}")
    return files, structure


def load_checkpoint(directory: str | os.PathLike, fingerprint: dict, apply) -> tuple[Path, dict] | None:
    """The newest intact checkpoint of a run folder, restored by ``apply(path, state)``, or None when
    there is none. A damaged one (a file truncated or altered, a manifest that is not what was
    written, a state that ``apply`` cannot restore) is named in a warning and the previous one is
    used; none intact is a ``UserError``."""
    damaged = []
    for path in reversed(list_checkpoints(directory)):
        try:
            state = read_checkpoint(path, fingerprint)
            try:
                apply(path, state)
            except UserError:
                raise
            except (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError) as error:
                raise DamagedCheckpoint(f"{str(path)!r} cannot be restored ({type(error).__name__}: "
                                        f"{first_line(error)})") from error
        except DamagedCheckpoint as error:
            logger.warning("training.resume: the checkpoint %s; resuming from the previous complete one", error)
            damaged.append(str(error))
            continue
        return path, state
    if damaged:
        raise UserError(f"training.resume: no intact checkpoint in {str(directory)!r}: {'; '.join(damaged)}. Set "
                        "training.resume=false to start fresh.")
    return None


def differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    """``name old -> new`` for every leaf that differs between two fingerprints."""
    lines = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        if isinstance(before, dict) and isinstance(after, dict):
            lines += differences(before, after, f"{prefix}{name}.")
        elif before != after:
            lines.append(f"{prefix}{name} {before!r} -> {after!r}")
    return lines


def cpu_weights(model: torch.nn.Module) -> dict:
    """A copy of the model's weights in host memory (the best validated step's, kept aside)."""
    return {name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()}


def rng_states() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def restore_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    if states.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])
