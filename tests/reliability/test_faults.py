"""Crashes: kill -9 during training and during a checkpoint write; then resume."""

from __future__ import annotations

import multiprocessing
import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import optuna
import pytest
import torch

from bert_mlm.config import MaskingConfig
from bert_mlm.core.model.checkpoints import list_checkpoints, read_checkpoint, run_folders
from bert_mlm.core.train.loop import train
from bert_mlm.errors import UserError
from tests.kedro_runs import kedro_cli
from tests.reliability.conftest import mounted_tmpfs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "train"))
from test_loop import repetitive_sequences, setup  # noqa: E402

from tests.reliability.crash_worker import Worker  # noqa: E402


def start(mode: str, directory: Path, *extra: str) -> Worker:
    return Worker(mode, str(directory), *extra)


def wait_for(process: Worker, text: str) -> None:
    for line in process.stdout:
        if text in line:
            return
    raise AssertionError(f"the worker exited before printing {text!r}")


def test_kill_9_during_training_then_resume_gives_identical_weights(tmp_path):
    sequences = repetitive_sequences()
    model, ids, config, collator = setup(max_steps=12)
    train(model, sequences, ids, MaskingConfig(), config, collator)
    uninterrupted = model.state_dict()

    worker = start("train", tmp_path)
    wait_for(worker, "step 7")
    worker.kill()
    worker.wait(timeout=30)
    assert [p.name for p in list_checkpoints(run_folders(tmp_path)[-1])] == ["step-00000003", "step-00000006"]

    resumed, ids, config, collator = setup(max_steps=12, checkpoint_every=3, checkpoint_dir=str(tmp_path), resume=True)
    result = train(resumed, sequences, ids, MaskingConfig(), config, collator)
    assert result.resumed_from_step == 6
    for key, value in uninterrupted.items():
        assert torch.equal(value, resumed.state_dict()[key]), key


def test_kill_9_during_a_checkpoint_write_keeps_the_previous_one(tmp_path):
    worker = start("write", tmp_path)
    wait_for(worker, "writing")
    worker.kill()
    worker.wait(timeout=30)
    complete = list_checkpoints(tmp_path)
    assert [p.name for p in complete] == ["step-00000001"]
    assert torch.equal(read_checkpoint(complete[0])["weights"], torch.ones(4))
    # The half-written one exists only under a temporary name, which resume never reads.
    assert any(p.name.startswith(".step-00000002.tmp") for p in tmp_path.iterdir())


def test_kill_9_while_a_model_version_is_written_keeps_the_previous_version(tmp_path):
    from kedro.io.core import Version

    from bert_mlm.config import TokenizerConfig
    from bert_mlm.core.tokens.tokenizer import train_wordpiece
    from bert_mlm.datasets.pretrained import MaskedLM, MaskedLMDataset

    tokenizer = train_wordpiece(["a small corpus of words"] * 20,
                                TokenizerConfig(vocab_size=64, min_frequency=1, base_alphabet="none"))
    model, *_ = setup()
    path = str(tmp_path / "masked_lm")
    MaskedLMDataset(path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(MaskedLM(model, tokenizer))
    worker = start("model", path)
    wait_for(worker, "writing")
    worker.kill()
    worker.wait(timeout=30)
    latest = MaskedLMDataset(path, version=Version(None, None))
    assert str(latest._get_load_path()).endswith("2026-01-01T00.00.00.000Z/masked_lm")
    assert latest.load().model.config.hidden_size == 32


def _documents_and_first_store(tmp_path: Path, shared: Path, vocab: Path):
    """Document shards of two books (small chunks: several work items) and one good store version."""
    from kedro.io.core import Version

    from bert_mlm.config import CorpusConfig, DataConfig
    from bert_mlm.core.data.documents import DocumentShards
    from bert_mlm.core.data.ingestion import DocumentStream
    from bert_mlm.core.data.sources import CorpusSource
    from bert_mlm.core.tokens.tokenization import EncodingJob
    from bert_mlm.core.tokens.tokenizer import load_tokenizer
    from bert_mlm.datasets.data import TokenStoreDataset

    books = [shared / "corpora" / "gutenberg" / name for name in ("austen-persuasion.txt", "chesterton-brown.txt")]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for book in books:
        (corpus / book.name).symlink_to(book)
    data = DataConfig(workers=1, chunk_bytes=1 << 16, reuse=False)  # saved again by the tests: written, not reused
    DocumentStream(CorpusSource(str(corpus)), CorpusConfig(), data).write(tmp_path / "documents")
    tokenizer = load_tokenizer(vocab)
    job = EncodingJob(
        DocumentShards(tmp_path / "documents"),
        tokenizer.backend_tokenizer.to_str(),
        tokenizer.get_vocab(),
        tokenizer.sep_token_id,
        data,
    )
    TokenStoreDataset(str(tmp_path / "token_store"), version=Version(None, "2026-01-01T00.00.00.000Z")).save(job)
    return job


def test_kill_9_while_the_token_store_is_written_keeps_the_previous_version(tmp_path, shared_data):
    from kedro.io.core import Version

    from bert_mlm.datasets.data import TokenStoreDataset

    vocab = shared_data / "vocab" / "bert-base-uncased.vocab.txt"
    _documents_and_first_store(tmp_path, shared_data, vocab)
    worker = start("store", tmp_path, str(vocab))
    wait_for(worker, "writing")
    partial = [p for p in (tmp_path / "token_store").rglob(".token_store.tmp-*") if p.is_dir()]
    assert partial and (partial[0] / "train.bin").stat().st_size > 0  # half a store on disk
    worker.kill()
    worker.wait(timeout=30)
    latest = TokenStoreDataset(str(tmp_path / "token_store"), version=Version(None, None))
    assert str(latest._get_load_path()).endswith("2026-01-01T00.00.00.000Z/token_store")
    store = latest.load()
    assert len(store.split("train")) > 1000 and store.split("train").document(0).size > 0


def test_a_full_disk_while_shards_or_the_store_are_written_leaves_no_version(tmp_path, shared_data):
    """A real full disk (a small tmpfs, filled up to 200 kB): the write fails naming the cause, no version appears, and
    the previous one still loads."""
    from kedro.io import DatasetError
    from kedro.io.core import Version

    from bert_mlm.config import CorpusConfig, DataConfig
    from bert_mlm.core.data.ingestion import DocumentStream
    from bert_mlm.core.data.sources import CorpusSource
    from bert_mlm.datasets.data import DocumentShardsDataset, TokenStoreDataset

    vocab = shared_data / "vocab" / "bert-base-uncased.vocab.txt"
    job = _documents_and_first_store(tmp_path, shared_data, vocab)
    disk = tmp_path / "disk"
    disk.mkdir()
    with mounted_tmpfs(disk, "size=3m"):
        import shutil

        shutil.copytree(tmp_path / "token_store", disk / "token_store")
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "filler").write_bytes(b"\0" * max(0, free - (200 << 10)))  # 200 kB left: less than a store
        target = TokenStoreDataset(str(disk / "token_store"), version=Version(None, "2026-01-03T00.00.00.000Z"))
        with pytest.raises((OSError, DatasetError), match="No space left on device"):
            target.save(job)
        latest = TokenStoreDataset(str(disk / "token_store"), version=Version(None, None))
        assert str(latest._get_load_path()).endswith("2026-01-01T00.00.00.000Z/token_store")
        assert len(latest.load().split("train")) > 1000
        assert not list((disk / "token_store").rglob(".token_store.tmp-*"))  # the partial write was removed

        (disk / "filler").unlink()
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "filler").write_bytes(b"\0" * max(0, free - (200 << 10)))
        shards = DocumentShardsDataset(str(disk / "corpus_documents"), version=Version(None, None))
        big = tmp_path / "big"
        big.mkdir()
        for copy in range(4):
            (big / f"moby-{copy}.txt").symlink_to(shared_data / "corpora" / "gutenberg" / "melville-moby_dick.txt")
        stream = DocumentStream(
            CorpusSource(str(big)), CorpusConfig(deduplicate=False), DataConfig(workers=1, chunk_bytes=1 << 16)
        )
        with pytest.raises((OSError, DatasetError), match="No space left on device"):
            shards.save(stream)
        assert not [p for p in (disk / "corpus_documents").rglob("*") if p.is_file()]
        assert not shards.exists()


def test_fp16_overflow_skips_the_step_and_training_goes_on():
    model, ids, config, collator = setup(precision="fp16", max_steps=8)
    poison = {"step": 0}
    embeddings = model.bert.embeddings.word_embeddings.weight
    snapshots = {}

    def overflow_once(gradient):
        return gradient * float("inf") if poison["step"] == 3 else gradient

    def on_step(step, record):
        poison["step"] = step
        snapshots[step] = embeddings.detach().clone()

    embeddings.register_hook(overflow_once)
    result = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, on_step=on_step)
    scales = result.history["loss_scale"].tolist()
    assert scales[3] == scales[2] / 2  # the scaler backed off at the overflowing step 4
    assert torch.equal(snapshots[4], snapshots[3])  # ...and skipped it: weights unchanged
    assert not torch.equal(snapshots[5], snapshots[4])  # then training went on
    assert len(result.history) == 8


TUNING_WORKER = Path(__file__).resolve().parents[1] / "core" / "study" / "tuning_worker.py"


@pytest.mark.slow
def test_killed_worker_trial_is_failed_and_the_next_run_finishes(tmp_path, capsys):
    storage = f"sqlite:///{tmp_path}/study.db"
    worker = subprocess.Popen(
        [sys.executable, str(TUNING_WORKER), storage, "4", "0", "2"], stdout=subprocess.PIPE, text=True
    )
    line = worker.stdout.readline()
    assert "hanging in trial 2" in line
    worker.kill()  # SIGKILL: no chance to clean up
    worker.wait(timeout=30)
    study = optuna.load_study(study_name="workers", storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "RUNNING"]
    time.sleep(4)  # past the grace period: the heartbeat is stale

    # The next run, in this process (a worker process would spend ~5 s importing torch first).
    with mock.patch.object(sys, "argv", [str(TUNING_WORKER), storage, "4", "0"]):
        runpy.run_path(str(TUNING_WORKER), run_name="__main__")
    assert capsys.readouterr().out.strip().endswith("done")
    study = optuna.load_study(study_name="workers", storage=storage)
    states = [t.state.name for t in study.trials]
    assert states[:3] == ["COMPLETE", "COMPLETE", "FAIL"]
    assert states.count("COMPLETE") == 4


def _descendants(pid: int) -> set[int]:
    """The live processes below ``pid`` (from /proc: Linux)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
@pytest.mark.slow
def test_kill_9_of_a_data_stage_run_leaves_no_process_and_the_next_run_removes_its_leftovers(
    project_copy, shared_data, tmp_path
):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for copy in range(3):  # enough text that the cleaning pool is still busy when the run is killed
        for book in sorted((shared_data / "corpora" / "gutenberg").glob("*.txt")):
            (corpus / f"{copy}-{book.name}").symlink_to(book)
    command = [sys.executable, "-m", "bert_mlm", "--env", "smoke", "--pipeline", "ingestion",
               "--params", f"corpus.path={corpus},data.workers=2,data.chunk_bytes=65536"]
    run = subprocess.Popen(command, cwd=project_copy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}, start_new_session=True)
    data = project_copy / "data"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and run.poll() is None:
            workers = _descendants(run.pid)
            partial = [p for p in data.rglob(".corpus_documents.tmp-*") if any(p.iterdir())]
            if len(workers) >= 2 and partial:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the run ended (or never wrote) before it could be killed mid-write")
        run.kill()
        run.wait(timeout=30)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_running(pid) for pid in workers):
            time.sleep(0.1)
        assert not [pid for pid in workers if _running(pid)], "pool workers outlived their killed run"
    finally:
        os.killpg(run.pid, 9) if run.poll() is None else None
        for pid in _descendants(run.pid) | {p for p in locals().get("workers", ()) if _running(p)}:
            os.kill(pid, 9)
    version_folder = partial[0].parent
    assert partial[0].exists() and version_folder.exists()  # what a kill -9 leaves: nothing renamed, nothing removed

    # The next run, in this process, on one short book: it removes the leftovers as it starts, whatever it reads
    # (the 39 books again cost seconds of cleaning that test nothing here).
    result = kedro_cli(project_copy, "--pipeline", "ingestion", "--params",
                       f"corpus.path={shared_data / 'corpora' / 'gutenberg' / 'blake-poems.txt'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Removed 1 unfinished write(s) of killed runs" in result.stdout + result.stderr
    assert not partial[0].exists() and not version_folder.exists()
    assert not list(data.rglob("*.tmp-*"))


def _save_under_a_file_size_limit(path: str, answer) -> None:
    """In a forked child (the limit is the process's): a sequence index saved where the kernel lets only
    1 MB of a file through; ``answer`` gets the error's kind and message."""
    import resource
    import signal

    import numpy as np
    from kedro.io.core import Version

    from bert_mlm.cli import user_error_in
    from bert_mlm.core.tokens.sequences import SequenceIndex, SplitIndex
    from bert_mlm.datasets.data import SequenceIndexDataset

    n = 200_000  # 1.6 MB in each int64 file; the limit below lets 1 MB of a file through
    splits = {s: SplitIndex(np.arange(n, dtype=np.int64), np.full(n, 64, np.int64), np.zeros(n, bool))
              for s in ("train", "test")}
    index = SequenceIndex("packed", 64, splits, {"train": "x", "test": "y"})
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails (EFBIG, or a short write) instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try:
        SequenceIndexDataset(path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(index)
        answer.send(("saved", ""))
    except Exception as error:
        answer.send((type(user_error_in(error)).__name__, str(user_error_in(error) or error)))


def test_a_write_the_file_system_cuts_short_names_the_artifact_the_place_and_the_space(tmp_path):
    """Real write calls refused by the kernel (a file-size limit in a forked child: a full disk needs
    root to make): numpy's "N requested and M written" becomes one line naming the sequence index,
    its path and the space it needed."""
    context = multiprocessing.get_context("fork")  # the child has the project imported: no 4 s of imports
    answer, child_end = context.Pipe(duplex=False)
    child = context.Process(target=_save_under_a_file_size_limit, args=(str(tmp_path / "sequence_index"), child_end))
    child.start()
    assert answer.poll(120), "the child answered nothing"
    kind, message = answer.recv()
    child.join(30)
    assert kind == "UserError", message
    assert message.startswith(
        f"sequence_index: the file system took only part of a write (a full disk, a quota or a "
        f"file-size limit) writing {tmp_path}/sequence_index/2026-01-01T00.00.00.000Z/sequence_index "
        "(6.8 MB needed, "
    ), message
    assert "requested and" not in message
    assert [p.name for p in (tmp_path / "sequence_index" / "2026-01-01T00.00.00.000Z").iterdir()] == []


def test_a_full_disk_while_the_store_is_written_is_one_line_and_leaves_nothing(tmp_path, shared_data, monkeypatch):
    """ENOSPC from the token store's own file writes (the write call is replaced, as a full disk cannot be made without
    root): one line with the artifact, where, "No space left on device" and the space needed; no partial version."""
    import errno

    from kedro.io.core import Version

    from bert_mlm.core.tokens import token_store as store_module
    from bert_mlm.datasets.data import TokenStoreDataset

    job = _documents_and_first_store(tmp_path, shared_data, shared_data / "vocab" / "bert-base-uncased.vocab.txt")

    class FillsUp:
        """A file that takes 100 kB, then fails as a full disk does."""

        def __init__(self, handle):
            self.handle, self.room = handle, 100_000

        def write(self, data):
            if len(data) > self.room:
                self.handle.write(bytes(data)[: self.room])
                self.room = 0
                raise OSError(errno.ENOSPC, "No space left on device")
            self.room -= len(data)
            return self.handle.write(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()
            return False

    monkeypatch.setattr(store_module, "open", lambda *a, **k: FillsUp(open(*a, **k)), raising=False)
    target = TokenStoreDataset(str(tmp_path / "token_store"), version=Version(None, "2026-01-03T00.00.00.000Z"))
    with pytest.raises(Exception) as raised:
        target.save(job)
    from bert_mlm.cli import user_error_in

    message = str(user_error_in(raised.value))
    assert re.fullmatch(
        rf"token_store: No space left on device writing {tmp_path}/token_store/2026-01-03T00\.00\.00\.000Z/"
        r"token_store \(at least 0\.\d MB needed, 0\.\d MB written when it stopped, [\d,.]+ MB free there\); "
        r"nothing of it was kept",
        message,
    ), message
    assert [p.name for p in (tmp_path / "token_store" / "2026-01-03T00.00.00.000Z").iterdir()] == []
    latest = TokenStoreDataset(str(tmp_path / "token_store"), version=Version(None, None))
    assert str(latest._get_load_path()).endswith("2026-01-01T00.00.00.000Z/token_store")


def test_a_checkpoint_write_cut_by_a_file_size_limit_is_one_line(tmp_path):
    """Before: a ~100-line traceback from safetensors mid-training (outputs already got one line). A real limit
    (ulimit -f) on this process for the length of the run; Python ignores SIGXFSZ, so the write fails with EFBIG."""
    import resource
    import signal

    assert signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN
    folder = tmp_path / "checkpoints"
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=str(folder), max_steps=8)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, limits[1]))
    try:
        with pytest.raises(UserError) as info:
            train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    message = str(info.value)
    assert re.match(r"training\.checkpoint_dir \(the checkpoint of step 4; the previous one is kept\): file too large "
                    r"\(the file-size limit, ulimit -f\) writing .*/run-[0-9a-f]+/step-00000004 \([\d.]+ MB needed, "
                    r"[\d.]+ MB written when it stopped, [\d,.]+ MB free there\); nothing of it was kept$",
                    message), message
    assert not list(folder.rglob("*.tmp-*")) and not list(folder.rglob("step-*"))


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_checkpoint_folder_that_turns_read_only_or_full_mid_run_is_one_line(tmp_path, fault):
    """A real file system (a tmpfs mounted read-only, or one too small for a checkpoint): the run stops with
    one line naming the checkpoint and the reason, and the checkpoint before stays (none here: the first fails)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    options = "size=1m,ro" if fault == "read-only" else "size=64k"
    with mounted_tmpfs(disk, options):
        model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=str(disk), max_steps=8)
        with pytest.raises(UserError) as info:
            train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
    message = str(info.value)
    assert "\n" not in message
    expected = (r"cannot write .*/step-00000004: Read-only file system \(.*\): a read-only file system; nothing of "
                r"it was kept" if fault == "read-only" else
                r"No space left on device writing .*/step-00000004 \([\d.]+ MB needed, ")
    assert re.match(rf"training\.checkpoint_dir \(the checkpoint of step 4; the previous one is kept\): {expected}",
                    message), message
