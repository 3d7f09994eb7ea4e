"""Corpora where and as users keep them: compressed files, HTTP and S3 servers (started here),
Hugging Face datasets saved to disk, what Kedro datasets load, and the files a listing skips."""

from __future__ import annotations

import bz2
import csv
import gzip
import http.server
import io
import logging
import lzma
import os
import re
import tarfile
import threading
import time

import pandas as pd
import pytest

from bert_mlm.config import CorpusConfig, DataConfig
from bert_mlm.core.data.corpus import CorpusError, clean_documents
from bert_mlm.core.data.documents import DocumentShards
from bert_mlm.core.data.ingestion import DocumentStream
from bert_mlm.core.data.sources import (
    CorpusSource,
    HFDataset,
    as_corpus_source,
    iter_text_file,
    list_corpus_files,
    mixture_source,
    read_corpus,
    read_task,
    read_tasks,
)
from bert_mlm.errors import UserError

try:
    from compression import zstd  # Python 3.14
except ImportError:
    from backports import zstd

RATIOS = {"train": 0.8, "valid": 0.1, "test": 0.1}
COMPRESSORS = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": zstd.compress,
}


def texts_of(source: CorpusSource) -> list[str]:
    frame, _ = clean_documents(item for batch in source.batches(1 << 15) for item in batch)
    return frame["text"].tolist()


@pytest.fixture
def book(shared_data) -> bytes:
    return (shared_data / "corpora" / "gutenberg" / "austen-persuasion.txt").read_bytes()[:300_000]


@pytest.fixture
def reviews(shared_data) -> pd.DataFrame:
    frame = pd.read_csv(shared_data / "corpora" / "chnsenticorp" / "ChnSentiCorp_htl_all.csv")
    frame = frame.dropna().head(600).rename(columns={"review": "text"})
    # One line per review, unquoted (a GLUE-style TSV row holds no newline, tab or quote)
    return frame.assign(text=frame["text"].str.replace(r"[\t\r\n\"]+", " ", regex=True))


# ----------------------------------------------------------------------------- compressed files
@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_compressed_text_reads_as_the_plain_file_in_bounded_chunks(tmp_path, book, suffix):
    plain = tmp_path / "book.txt"
    plain.write_bytes(book)
    packed = tmp_path / f"book.txt{suffix}"
    packed.write_bytes(COMPRESSORS[suffix](book))
    chunks = list(iter_text_file(packed, chunk_bytes=1 << 15))
    assert len(chunks) > 5 and max(len(c.text.encode()) for c in chunks) < 4 << 15
    assert "".join(c.text for c in chunks) == "".join(c.text for c in iter_text_file(plain, chunk_bytes=1 << 15))
    assert texts_of(CorpusSource(str(packed))) == texts_of(CorpusSource(str(plain)))


@pytest.mark.parametrize(("name", "write"), [
    ("rows.jsonl.gz", lambda f, p: p.write_bytes(gzip.compress(f.to_json(orient="records", lines=True,
                                                                        force_ascii=False).encode()))),
    ("rows.csv.bz2", lambda f, p: p.write_bytes(bz2.compress(f.to_csv(index=False).encode()))),
    ("rows.tsv.xz", lambda f, p: p.write_bytes(lzma.compress(  # TSV as GLUE writes it: no quoting
        f.to_csv(index=False, sep="\t", quoting=csv.QUOTE_NONE).encode()))),
    ("rows.json.zst", lambda f, p: p.write_bytes(zstd.compress(
        f.to_json(orient="records", lines=True, force_ascii=False).encode()))),
])
def test_compressed_tables_of_chinese_reviews_read_as_the_plain_table(tmp_path, reviews, name, write):
    reviews.to_csv(tmp_path / "plain.csv", index=False)
    write(reviews, tmp_path / name)
    got = texts_of(CorpusSource(str(tmp_path / name)))
    assert got == texts_of(CorpusSource(str(tmp_path / "plain.csv")))
    assert len(got) > 500 and any("酒店" in t for t in got)


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_a_truncated_archive_is_one_error_naming_the_file_and_how_far_it_got(tmp_path, book, suffix):
    packed = COMPRESSORS[suffix](book * 3)
    path = tmp_path / f"cut.txt{suffix}"
    path.write_bytes(packed[: len(packed) // 2])
    target = tmp_path / "shards"
    stream = DocumentStream(
        CorpusSource(str(path)), CorpusConfig(split_ratios=RATIOS), DataConfig(workers=1, chunk_bytes=1 << 16)
    )
    with pytest.raises(CorpusError) as info:
        stream.write(target)
    message = str(info.value)
    assert str(path) in message and "truncated or corrupt" in message and "uncompressed bytes" in message
    assert "\n" not in message
    with pytest.raises(CorpusError):  # nothing usable was left: no manifest
        DocumentShards(target)


def test_a_folder_reads_its_compressed_files_and_names_every_skipped_file(tmp_path, book, caplog):
    (tmp_path / "a.txt").write_bytes(book[:100_000])
    for suffix, compress in COMPRESSORS.items():
        (tmp_path / f"b{suffix[1:]}.txt{suffix}").write_bytes(
            compress(book[100_000 * (1 + len(suffix) % 2) :][:100_000])
        )
    (tmp_path / "notes.docx").write_bytes(b"PK\x03\x04")
    pd.DataFrame({"text": ["a row of text here"]}).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.parquet.gz").write_bytes(gzip.compress((tmp_path / "t.parquet").read_bytes()))
    (tmp_path / ".DS_Store").write_bytes(b"\0")
    with caplog.at_level(logging.WARNING, logger="bert_mlm.core.data.sources"):
        files = [os.path.basename(str(f)) for f, _ in list_corpus_files(tmp_path)]
    assert files == ["a.txt", "bbz2.txt.bz2", "bgz.txt.gz", "bxz.txt.xz", "bzst.txt.zst", "t.parquet"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "2 file(s) skipped" in warnings[0] and "notes.docx" in warnings[0] and "t.parquet.gz" in warnings[0]
    assert ".docx is not a corpus format" in warnings[0] and "DS_Store" not in warnings[0]


# ----------------------------------------------------------------------------- encodings and links
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig"])
def test_files_with_a_byte_order_mark_are_decoded_not_called_binary(tmp_path, encoding):
    text = "The first paragraph of English text here.\n\n第二段：这家酒店的服务很好，房间干净。\n"
    path = tmp_path / "bom.txt"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path.write_bytes(data)
    got = texts_of(CorpusSource(str(path)))
    assert got == ["The first paragraph of English text here.", "第二段：这家酒店的服务很好，房间干净。"]
    rows = pd.DataFrame({"text": got * 2000})  # a table read through buffered text: exact read sizes
    table = rows.to_json(orient="records", lines=True, force_ascii=False).encode(encoding)
    (tmp_path / "rows.jsonl").write_bytes(b"\xfe\xff" + table if encoding == "utf-16-be" else table)
    assert texts_of(CorpusSource(str(tmp_path / "rows.jsonl"))) == got


def test_many_links_to_one_directory_are_one_warning_not_a_loop(tmp_path, caplog):
    real = tmp_path / "books"
    real.mkdir()
    (real / "a.txt").write_text("One paragraph of text with words.")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(16):
        (corpus / f"link{i:02d}").symlink_to(real, target_is_directory=True)
    (corpus / "link00" / "loop").symlink_to(corpus, target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger="bert_mlm.core.data.sources"):
        files = list_corpus_files(corpus)
    assert len(files) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("symlink loop" in w for w in warnings) == 1  # only the link up the tree
    assert sum("15 link(s) lead to a directory already read" in w for w in warnings) == 1


# ----------------------------------------------------------------------------- remote file systems
def test_a_corpus_on_an_http_server_reads_as_the_local_one(http_root, book, reviews):
    root, url = http_root
    (root / "corpus").mkdir()
    (root / "corpus" / "book.txt.gz").write_bytes(gzip.compress(book))
    reviews.to_csv(root / "corpus" / "reviews.csv", index=False)
    (root / "corpus" / "ignore.pdf").write_bytes(b"%PDF")
    remote = CorpusSource(f"{url}/corpus/")
    assert [os.path.basename(str(f)) for f in remote.files()] == ["book.txt.gz", "reviews.csv"]
    assert texts_of(remote) == texts_of(CorpusSource(str(root / "corpus")))
    with pytest.raises(CorpusError, match=r"corpus\.path: '.*/missing\.txt' does not exist"):
        CorpusSource(f"{url}/missing.txt").check()
    with pytest.raises(CorpusError, match=r"could not be listed .*reachable"):
        CorpusSource("http://127.0.0.1:9/x.txt").check()


def test_a_protocol_without_its_package_names_the_extra_to_install():
    pytest.importorskip("gcsfs", reason=None) if False else None
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(
            CorpusError, match=r'gs:// paths needs gcsfs; install it with pip install "bert_mlm\[gcs\]"'
        ):
            CorpusSource("gs://bucket/corpus/").check()
    else:
        pytest.skip("gcsfs is installed here")


def test_a_corpus_in_s3_reads_with_credentials_and_a_wrong_key_is_one_line(s3_server, tmp_path, book, reviews):
    s3, credentials = s3_server
    s3.put_object(Bucket="corpora", Key="mixed/book.txt.zst", Body=zstd.compress(book))
    s3.put_object(Bucket="corpora", Key="mixed/reviews.jsonl.gz",
                  Body=gzip.compress(reviews.to_json(orient="records", lines=True, force_ascii=False).encode()))
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "book.txt").write_bytes(book)
    reviews.to_json(tmp_path / "local" / "reviews.jsonl", orient="records", lines=True, force_ascii=False)
    remote = CorpusSource("s3://corpora/mixed/", storage_options=credentials)
    assert texts_of(remote) == texts_of(CorpusSource(str(tmp_path / "local")))
    glob = CorpusSource("s3://corpora/mixed/*.gz", storage_options=credentials)
    assert [str(f) for f in glob.files()] == ["s3://corpora/mixed/reviews.jsonl.gz"]
    wrong = CorpusSource("s3://corpora/mixed/", storage_options={**credentials, "secret": "not-the-secret"})
    with pytest.raises(CorpusError) as info:
        wrong.check()
    assert "access to 's3://corpora/mixed/' was refused" in str(info.value) and "\n" not in str(info.value)
    assert "not-the-secret" not in str(info.value)
    with pytest.raises(CorpusError, match="matches no file"):
        CorpusSource("s3://corpora/mixed/*.parquet", storage_options=credentials).check()


# ----------------------------------------------------------------------------- Hugging Face datasets
def test_a_hugging_face_dataset_saved_to_disk_is_a_corpus(tmp_path, reviews):
    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict({"train": datasets.Dataset.from_pandas(reviews, preserve_index=False)}).save_to_disk(
        tmp_path / "saved")
    source = CorpusSource(hf_dataset=HFDataset.from_mapping({"path": str(tmp_path / "saved"), "split": "train"}))
    source.check()
    reviews.to_csv(tmp_path / "plain.csv", index=False)
    assert texts_of(source) == texts_of(CorpusSource(str(tmp_path / "plain.csv")))
    with pytest.raises(CorpusError, match=r"corpus\.hf_dataset\.split: 'test' is not a split .* \['train'\]"):
        HFDataset.from_mapping({"path": str(tmp_path / "saved"), "split": "test"}).open()
    with pytest.raises(CorpusError, match=r"corpus\.hf_dataset\.text_column: column 'body' does not exist"):
        HFDataset.from_mapping({"path": str(tmp_path / "saved"), "text_column": "body"}).open()


def test_a_hub_dataset_offline_and_not_cached_is_one_clear_error(monkeypatch, tmp_path):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    # Read at import: set here too, or datasets (imported by an earlier test) tries the network first.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-home" / "datasets", raising=False)
    with pytest.raises(CorpusError) as info:
        HFDataset.from_mapping({"name": "someone/not-cached-corpus", "split": "train"}).open()
    message = str(info.value)
    assert message.startswith("corpus.hf_dataset: hf:someone/not-cached-corpus[train] could not be loaded (offline")
    assert "save_to_disk" in message


def test_hf_dataset_settings_are_checked():
    with pytest.raises(CorpusError, match="exactly one of name"):
        HFDataset.from_mapping({"split": "train"})
    with pytest.raises(CorpusError, match=r"unknown key\(s\) \['colum'\]"):
        HFDataset.from_mapping({"name": "x", "colum": "text"})


# ----------------------------------------------------------------------------- what Kedro datasets load
def test_what_a_kedro_dataset_loads_is_a_corpus(reviews):
    frame = as_corpus_source(reviews, "text")
    partitions = {
        "b.txt": lambda: "Second file, one paragraph of words.",
        "a.txt": lambda: "First file text with words.",
    }
    assert texts_of(frame) == reviews["text"].tolist()[: len(texts_of(frame))] and len(texts_of(frame)) > 500
    assert texts_of(as_corpus_source(partitions)) == [
        "First file text with words.",
        "Second file, one paragraph of words.",
    ]
    with pytest.raises(CorpusError, match=r"column 'body' does not exist in the catalog's raw_corpus"):
        texts_of(as_corpus_source(reviews, "body"))


def test_read_corpus_of_a_compressed_file_names_the_source_as_given(tmp_path):
    path = tmp_path / "x.txt.gz"
    path.write_bytes(gzip.compress(b"Some words in a paragraph here.\n"))
    assert [i.source for i in read_corpus(path)] == [str(path)]


# ----------------------------------------------------------------------------- what a reader meets (issue 39)
class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that hung up (a refused range probe)
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``files``: with ``token``, only to its bearer; with ``ranges``, byte ranges (206);
    with ``cut`` (a fraction), it promises the whole file and dies after that share of it."""

    files: dict[str, bytes] = {}
    token: str | None = None
    ranges = False
    cut: float | None = None

    def log_message(self, *args):
        pass

    def _file(self) -> bytes | None:
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_error(401)
        elif self.path.split("?")[0] not in self.files:  # a signed URL's query is no part of the path
            self.send_error(404)
        else:
            return self.files[self.path.split("?")[0]]
        return None

    def do_HEAD(self):
        data = self._file()
        if data is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Accept-Ranges", "bytes" if self.ranges else "none")
            self.end_headers()

    def do_GET(self):
        data = self._file()
        if data is None:
            return
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "")) if self.ranges else None
        if wanted:
            start, stop = int(wanted[1]), min(len(data), int(wanted[2] or len(data) - 1) + 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
            data = data[start:stop]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Type", "text/plain" if self.path.endswith(".txt") else "application/octet-stream")
        self.end_headers()
        if not self.cut:
            self.wfile.write(data)
            return
        for start in range(0, int(len(data) * self.cut), 16384):  # in pieces, as a network delivers them
            self.wfile.write(data[start:min(start + 16384, int(len(data) * self.cut))])
            self.wfile.flush()
            time.sleep(0.01)
        self.close_connection = True


@pytest.fixture
def serve():
    """Start an HTTP server of the given files and settings (``_Handler``); returns its URL."""
    servers = []

    def start(files: dict[str, bytes], **settings) -> str:
        handler = type("Handler", (_Handler,), {"files": files, **settings})
        server = _Server(("127.0.0.1", 0), handler)
        # shutdown() waits for the loop's next poll (by default half a second, in every teardown)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_an_http_server_that_dies_mid_transfer_is_one_line_naming_the_url_and_the_bytes_read(serve, book):
    url = serve({"/book.txt": book, "/book.txt.gz": gzip.compress(book)}, cut=0.5)
    for name in ("book.txt", "book.txt.gz"):
        with pytest.raises(CorpusError) as info:
            texts_of(CorpusSource(url.replace("http://", "http://reader:SECRET@") + f"/{name}"))
        message = str(info.value)
        assert message.startswith(f"corpus file '{url.replace('http://', 'http://reader:***@')}/{name}' ")
        assert re.search(r"broke after [1-9][\d,]* bytes|broke after [\d,]+ uncompressed bytes \([1-9][\d,]* bytes of "
                         r"the file read\)", message), message
        assert "SECRET" not in message and "\n" not in message


def test_a_signed_url_is_read_by_the_suffix_of_its_path_not_of_its_query(serve, book, tmp_path):
    url = serve({"/book.txt.gz": gzip.compress(book)})
    signed = CorpusSource(f"{url}/book.txt.gz?X-Amz-Credential=AKIA&X-Amz-Signature=SECRET")
    (tmp_path / "book.txt").write_bytes(book)
    assert texts_of(signed) == texts_of(CorpusSource(str(tmp_path / "book.txt")))


def test_an_authenticated_http_corpus_is_read_in_byte_ranges_with_its_credentials(serve, book, tmp_path):
    url = serve({"/book.txt": book}, token="SECRET-TOKEN", ranges=True)
    credentials = {"headers": {"Authorization": "Bearer SECRET-TOKEN"}}
    remote = CorpusSource(f"{url}/book.txt", storage_options=credentials)
    tasks = list(read_tasks(remote, 1 << 16))  # the range probe carries the credentials (urllib's did not)
    assert [t.kind for t in tasks] == ["range"] * len(tasks) and len(tasks) >= 4
    (tmp_path / "book.txt").write_bytes(book)
    expected = texts_of(CorpusSource(str(tmp_path / "book.txt")))
    assert clean_documents([item for task in tasks for item in read_task(task)])[0]["text"].tolist() == expected
    assert texts_of(remote) == expected
    with pytest.raises(CorpusError, match=r"could not be listed \(ClientResponseError: 401"):
        CorpusSource(f"{url}/book.txt").check()


def test_a_large_file_on_a_server_without_byte_ranges_is_read_whole(http_root):
    """fsspec's random-access HTTP file asks for a range past its first 5 MB block, which such a
    server answers with the whole file: a sequential read streams one GET instead."""
    root, url = http_root
    (root / "big.txt").write_text("".join(f"Paragraph {i} of a long corpus, wrapped\nover two lines.\n\n"
                                          for i in range(96_000)))  # 5.5 MB: past fsspec's first 5 MiB block
    assert texts_of(CorpusSource(f"{url}/big.txt")) == texts_of(CorpusSource(str(root / "big.txt")))


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_compressed_data_named_txt_is_known_by_its_magic_bytes_and_read(tmp_path, book, suffix):
    (tmp_path / "plain.txt").write_bytes(book)
    (tmp_path / "packed.txt").write_bytes(COMPRESSORS[suffix](book))
    assert texts_of(CorpusSource(str(tmp_path / "packed.txt"))) == texts_of(CorpusSource(str(tmp_path / "plain.txt")))
    tasks = list(read_tasks(CorpusSource(str(tmp_path / "packed.txt")), 1 << 16))
    assert [t.kind for t in tasks] == ["file"]  # one worker decompresses it; never byte ranges of compressed bytes
    assert [i.text for i in read_task(tasks[0])] == [c.text for c in iter_text_file(tmp_path / "plain.txt", 1 << 16)]


def test_an_archive_is_said_to_be_one_whether_named_so_or_not(tmp_path, book):
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo("book.txt")
        info.size = len(book)
        tar.addfile(info, io.BytesIO(book))
    (tmp_path / "corpus.tar.gz").write_bytes(gzip.compress(archive.getvalue()))
    (tmp_path / "corpus.txt.gz").write_bytes(gzip.compress(archive.getvalue()))
    reason = r"\(\.tar is an archive of files: unpack it and give its folder\)"
    with pytest.raises(CorpusError, match=rf"^corpus\.path: .*corpus\.tar\.gz {reason} is not read; supported are"):
        list_corpus_files(tmp_path / "corpus.tar.gz")  # the reason a folder's warning gives
    with pytest.raises(CorpusError, match=r"corpus file '.*corpus\.txt\.gz' is a tar archive, not text"):
        texts_of(CorpusSource(str(tmp_path / "corpus.txt.gz")))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.docx").write_bytes(b"PK\x03\x04")
    with pytest.raises(CorpusError, match=r"holds no corpus file: it holds .*notes\.docx \(\.docx is not a corpus"):
        list_corpus_files(tmp_path / "docs")


def test_a_hugging_face_column_of_numbers_and_a_split_of_a_splitless_dataset_are_one_line(tmp_path):
    datasets = pytest.importorskip("datasets")
    review = "房间很干净，服务也很周到，下次还来。"
    datasets.Dataset.from_dict({"text": [1, 2, 3], "review": [review] * 3}).save_to_disk(tmp_path / "flat")
    with pytest.raises(CorpusError) as info:
        CorpusSource(hf_dataset=HFDataset.from_mapping({"path": str(tmp_path / "flat")})).check()
    assert re.fullmatch(r"corpus\.hf_dataset\.text_column: column 'text' of 'hf-disk:.*flat' holds int64 values, "
                        r"not text", str(info.value))
    with pytest.raises(CorpusError, match=r"corpus\.hf_dataset\.split: 'train' was given, but .*flat' holds one "
                                          r"dataset without splits; remove corpus\.hf_dataset\.split"):
        HFDataset.from_mapping({"path": str(tmp_path / "flat"), "split": "train", "text_column": "review"}).open()
    assert texts_of(CorpusSource(hf_dataset=HFDataset.from_mapping({"path": str(tmp_path / "flat"),
                                                                    "text_column": "review"}))) == [review]


def test_corpus_path_and_hf_dataset_together_are_one_line(tmp_path):
    from kedro.io import DatasetError

    from bert_mlm.cli import user_error_in
    from bert_mlm.datasets import CorpusDataset

    message = r"^corpus: give one of corpus\.path, corpus\.hf_dataset or corpus\.sources, not corpus\.path and " \
              r"corpus\.hf_dataset$"
    with pytest.raises(UserError, match=message):  # --params: when the parameters are validated
        CorpusConfig(path="books.txt", hf_dataset={"name": "wikitext"})
    with pytest.raises(DatasetError) as info:  # globals.yml: when the catalog loads the corpus, one line
        CorpusDataset(path=str(tmp_path / "books.txt"), hf_dataset={"name": "wikitext"}).load()
    assert re.match(message, str(user_error_in(info.value)))


def test_the_same_mixture_source_twice_is_named_a_duplicate(tmp_path, book):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "a.txt").write_bytes(book)
    (tmp_path / "link.txt").symlink_to(tmp_path / "books" / "a.txt")
    twice = {"a": {"path": str(tmp_path / "books" / "a.txt"), "weight": 0.5},
             "b": {"path": str(tmp_path / "books" / "a.txt"), "weight": 0.5}}
    inside = {"a": {"path": str(tmp_path / "books")}, "b": {"path": str(tmp_path / "link.txt")}}
    for parts in (twice, inside):
        with pytest.raises(CorpusError, match=r"^corpus\.sources\.b: '.*(a|link)\.txt' is also a source of "
                                              r"corpus\.sources\.a \(a duplicate"):
            mixture_source(parts).check()
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": ["一段中文文本，足够长了。"]}).save_to_disk(tmp_path / "saved")
    saved = {"hf_dataset": {"path": str(tmp_path / "saved")}}
    with pytest.raises(CorpusError, match=r"corpus\.sources\.second: 'hf-disk:.*saved' is also a source of "
                                          r"corpus\.sources\.first"):
        mixture_source({"first": saved, "second": saved}).check()
