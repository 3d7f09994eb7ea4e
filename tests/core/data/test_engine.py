"""The data engines: order-preserving parallel maps, and the Dask engine writing the same files,
byte for byte, as the local one."""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

import pytest

from bert_mlm.config import CorpusConfig, DataConfig
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.data.engine import Finished, open_engine
from bert_mlm.core.data.ingestion import DocumentStream
from bert_mlm.core.data.sources import CorpusSource, read_task, read_tasks
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.tokens.tokenization import EncodingJob
from bert_mlm.core.tokens.tokenizer import load_tokenizer


def _square(x: int, offset: int) -> int:
    return x * x + offset


@pytest.mark.parametrize("workers", [1, 2])
def test_local_engine_keeps_the_input_order(workers):
    with open_engine(DataConfig(workers=workers, in_flight_per_worker=1)) as engine:
        assert list(engine.map_ordered(_square, range(50), 3)) == [x * x + 3 for x in range(50)]
        assert list(engine.map_ordered(_square, range(5), 0, python_bound=False)) == [0, 1, 4, 9, 16]


def _slow_item(item: list[int]) -> float:
    """A slow worker: a tenth of a second per item; returns when it finished (wall clock)."""
    time.sleep(0.1)
    return time.time()


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_never_runs_ahead_of_the_finished_work(workers, caplog):
    """A stage's progress counts an item when its result is back, not when it is handed to a worker:
    every line's share is at most the share of items finished by then (the first line included;
    counted at hand-out, the first line said 40 % with nothing finished yet)."""
    items = [[0] * size for size in (5, 1, 3, 8, 2, 2, 6, 1, 4, 3)]
    total = sum(map(len, items))
    progress = Progress(total, "slow stage", unit="item", every_seconds=0.0, terminal=False)
    lines = []
    progress.line = lambda now=None, line=progress.line: lines.append((time.time(), progress.done)) or line(now)
    with caplog.at_level(logging.INFO, logger="bert_mlm.progress"), \
            open_engine(DataConfig(workers=workers, in_flight_per_worker=2)) as engine:
        finished_at = list(engine.map_ordered(_slow_item, items, finished=Finished(progress, len)))
    progress.close()
    assert len(lines) >= len(items) and progress.done == total
    for logged_at, done in lines:
        finished = sum(len(item) for item, at in zip(items, finished_at, strict=True) if at <= logged_at)
        assert done <= finished
    assert f"slow stage: item 5/{total} (14%)" in caplog.text.splitlines()[0]  # the first item, once finished


def test_progress_rate_and_eta_come_from_the_finished_works_own_time():
    progress = Progress(10, "fine-tuning", unit="epoch", terminal=False)
    progress.started -= 100  # 100 s of set-up before the first epoch
    progress.update(2, seconds=4.0)
    line = progress.line()
    assert "0.50 epoch/s" in line and "ETA 0:16" in line  # 8 epochs left at 2 s each


@pytest.mark.parametrize(
    ("values", "parameter"),
    [({"engine": "spark"}, "data.engine"), ({"workers": 0}, "data.workers"), ({"chunk_bytes": 10}, "data.chunk_bytes"),
     ({"scheduler_address": "tcp://x:1"}, "data.scheduler_address"),
     ({"in_flight_per_worker": 0}, "data.in_flight_per_worker")],
)
def test_bad_data_config_names_the_parameter(values, parameter):
    with pytest.raises(ValueError, match=parameter.replace(".", r"\.")):
        DataConfig(**values)


def _files(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*")) if p.is_file()
    }


def _write(engine: DataConfig, corpus: Path, vocab: Path, target: Path) -> tuple[Path, Path]:
    stream = DocumentStream(CorpusSource(str(corpus)), CorpusConfig(), engine)
    stream.write(target / "documents")
    tokenizer = load_tokenizer(vocab)
    job = EncodingJob(DocumentShards(target / "documents"), tokenizer.backend_tokenizer.to_str(), tokenizer.get_vocab(),
                      tokenizer.sep_token_id, engine)
    job.write(target / "store")
    return target / "documents", target / "store"


@pytest.mark.slow
def test_dask_on_two_workers_writes_the_local_engines_bytes(shared_data, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("austen-persuasion.txt", "blake-poems.txt"):  # LF
        (corpus / name).symlink_to(shared_data / "corpora" / "gutenberg" / name)
    # CRLF: a quarter of the book (300 kB, two work items), the whole one made every engine's work 40 % longer
    book = (shared_data / "corpora" / "gutenberg" / "melville-moby_dick.txt").read_bytes()[:300_000]
    (corpus / "melville-moby_dick.txt").write_bytes(book[: book.rindex(b"\r\n") + 2])
    news = (shared_data / "corpora" / "msra-ner" / "news.txt").read_bytes()[:600_000]  # one paragraph per line
    (corpus / "news.txt").write_bytes(news[: news.rindex(b"\n") + 1])
    vocab = shared_data / "vocab" / "bert-base-uncased.vocab.txt"
    small_chunks = 256 << 10  # many work items, several per worker
    local = _write(DataConfig(engine="local", workers=2, chunk_bytes=small_chunks), corpus, vocab, tmp_path / "local")
    dask = _write(DataConfig(engine="dask", workers=2, chunk_bytes=small_chunks), corpus, vocab, tmp_path / "dask")
    for ours, theirs in zip(local, dask, strict=True):
        files = _files(ours)
        assert len(files) >= 4 and files == _files(theirs)
    store = TokenStore(dask[1])
    assert store.dtype.name == "uint16"  # 30,522 entries
    assert len(DocumentShards(dask[0]).row_groups("train")) > 2  # the work was split into several items
    assert len(store.split("train")) == DocumentShards(dask[0]).documents("train")
    assert DocumentShards(dask[0]).documents("train") > 6000  # the news file's ~5,000 lines are documents


def test_the_dask_cluster_starts_once_for_the_stages_of_a_run_and_logs_no_distributed_info(caplog):
    """One test for both (a cluster start and close is ~3 s): the stages of a run share one cluster, the next
    run starts its own, and none of it logs distributed's INFO chatter."""
    from bert_mlm.core.data.engine import close_engines

    config = DataConfig(engine="dask", workers=1)
    with caplog.at_level(logging.DEBUG, logger="distributed"):
        logging.getLogger("distributed").setLevel(logging.NOTSET)  # as a fresh process has it
        with open_engine(config) as ingestion:
            assert list(ingestion.map_ordered(len, ["ab", "abc"])) == [2, 3]
        with open_engine(config) as tokenization:  # the next stage: the same cluster, not a second start
            assert tokenization is ingestion and list(tokenization.map_ordered(len, ["abc"])) == [3]
        close_engines()  # the project's hooks, at the end of a run
        with open_engine(config) as next_run:
            assert next_run is not ingestion and list(next_run.map_ordered(len, ["a"])) == [1]
        close_engines()
    chatter = [r for r in caplog.records if r.name.startswith("distributed") and r.levelno < logging.WARNING]
    assert not chatter, [r.getMessage() for r in chatter[:5]]


@pytest.mark.slow
def test_dask_workers_read_a_remote_mixed_corpus_themselves_and_write_the_local_bytes(shared_data, tmp_path, s3_server):
    """Byte ranges of text files, Parquet row groups and whole compressed files, read by the workers
    from an S3 server: the same shards as the local engine reading a local copy."""
    import gzip

    import pandas as pd

    s3, credentials = s3_server
    book = (shared_data / "corpora" / "gutenberg" / "melville-moby_dick.txt").read_bytes()[:900_000]  # CRLF
    reviews = pd.read_csv(shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv").dropna()
    local = tmp_path / "local"
    local.mkdir()
    (local / "a-book.txt").write_bytes(book)
    (local / "b-book.txt.gz").write_bytes(gzip.compress(book[::-1].decode("utf-8", "ignore").encode()))
    reviews.rename(columns={"review": "text"}).to_parquet(local / "c-reviews.parquet", row_group_size=1500)
    for path in sorted(local.iterdir()):
        s3.put_object(Bucket="corpora", Key=f"mixed/{path.name}", Body=path.read_bytes())
    chunks = 64 << 10
    DocumentStream(CorpusSource(str(local)), CorpusConfig(), DataConfig(workers=2, chunk_bytes=chunks)).write(
        tmp_path / "ours"
    )
    tasks = list(read_tasks(CorpusSource("s3://corpora/mixed/", storage_options=credentials), chunks))
    assert [t.kind for t in tasks].count("range") >= 10 and {t.kind for t in tasks} == {"range", "file", "row_group"}
    assert all(not t.items for t in tasks)  # descriptions of pieces, not their bytes
    remote = CorpusSource("s3://corpora/mixed/", storage_options=credentials)
    DocumentStream(remote, CorpusConfig(), DataConfig(engine="dask", workers=2, chunk_bytes=chunks)).write(
        tmp_path / "dask"
    )
    ours, theirs = DocumentShards(tmp_path / "ours"), DocumentShards(tmp_path / "dask")
    for split in ("train", "valid", "test"):
        assert ours.frame(split)["text"].tolist() == theirs.frame(split)["text"].tolist()
    assert ours.manifest["cleaning"]["raw_items"] == theirs.manifest["cleaning"]["raw_items"]


def test_workers_on_other_machines_get_the_texts_of_local_files_and_read_remote_ones(tmp_path, http_root):
    root, url = http_root
    (tmp_path / "a.txt").write_text("A paragraph of local text with words.\n\nAnother one here with words.")
    (root / "b.txt").write_text("Remote text that the workers read.")
    local_tasks = list(read_tasks(CorpusSource(str(tmp_path / "a.txt")), 1 << 16, local_files=False))
    assert [t.kind for t in local_tasks] == ["items"] and "Another one" in local_tasks[0].items[0].text
    assert [t.kind for t in read_tasks(CorpusSource(str(tmp_path / "a.txt")), 1 << 16)] == ["range"]
    # http.server does not honour byte ranges: one worker reads the file whole (S3 ranges: the test above)
    remote = list(read_tasks(CorpusSource(f"{url}/b.txt"), 1 << 16, local_files=False))
    assert [t.kind for t in remote] == ["file"] and [i.text for i in read_task(remote[0])] == [
        "Remote text that the workers read."
    ]
