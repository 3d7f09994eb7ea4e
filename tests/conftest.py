"""Shared fixtures: the project root, ../shared data, and an isolated copy of the project."""

from __future__ import annotations

import functools
import gc
import http.server
import json
import os
import threading
from pathlib import Path

import pytest

from bert_mlm.scratch import scratch_project

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
# training.threads=auto reads it: the runs the tests start (in this process and in subprocesses)
# train with one thread, as pytest_configure sets for this process.
os.environ.setdefault("OMP_NUM_THREADS", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BERT_MLM_SHARED", PROJECT_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED / "corpora").is_dir():
        pytest.skip(f"../shared is absent (looked in {SHARED}); set BERT_MLM_SHARED to its path")
    return SHARED


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A scratch copy of the project (its conf/, an empty data/) in a temporary directory.

    Kedro sessions in tests run there, so they never touch (or depend on) the developer's data/.
    """
    return scratch_project(tmp_path, PROJECT_ROOT)


@pytest.fixture(scope="session")
def smoke_chain(tmp_path_factory) -> Path:
    """The project of the suite's one smoke chain run (tests/kedro_runs.py: ``smoke_chain_params``), shared by
    the xdist workers: read its outputs, never write there (``smoke_chain_copy`` is a copy to run more in)."""
    from tests.kedro_runs import shared_smoke_chain

    base = tmp_path_factory.getbasetemp()
    return shared_smoke_chain(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base, PROJECT_ROOT)


@pytest.fixture
def smoke_chain_copy(smoke_chain, tmp_path) -> Path:
    """A copy of the shared smoke chain's project, its data included, for a test that runs more stages in it."""
    from tests.kedro_runs import copy_project

    return copy_project(smoke_chain, tmp_path)


def pytest_configure(config):
    # The tests train tiny models: one thread is faster than two, and CI's two cores are shared
    # with tokenizers' Rust threads. Oversubscribed OpenMP threads slowed steps >10x here. xdist's controller
    # runs no test: it skips torch's import (~1.5 s before it starts the workers).
    if not (getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")):
        import torch

        torch.set_num_threads(1)
    # xdist's default hands each worker a first chunk of a quarter of its share, in collection order: the
    # long tests, sorted first, all went to one worker, which ran them alone at the end. One test at a time
    # is handed to whichever worker is free (longest first, then the rest as workers free up).
    if getattr(config.option, "maxschedchunk", "absent") is None:
        config.option.maxschedchunk = 1


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test starts on one torch thread: a Kedro run in this process sets torch's threads from
    training.threads (the runner test asks for two), and they stayed for every later test of the worker,
    beside the other worker's on two cores, and made its results differ from a one-thread run's."""
    yield
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def pytest_collection_finish(session):
    # Collection imported torch, transformers, kedro, pandas, ...: ~500,000 objects that live until the end.
    # Every full collection walked them all, ~0.3 s (1 s on the loaded 2 cores), and Optuna runs one after
    # each trial (gc_after_trial), the interpreter one whenever enough objects survive: the tuning tests
    # spent most of their time there. Frozen, they are left out of every collection (reference counting
    # still frees them; only cycles among them are never collected, and the imports make none to free).
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    # The long tests first: on several workers (`make test`: -n auto), a long test collected last
    # would run alone at the end while the other workers sit idle. The sort is stable. Among them, those
    # that read the shared smoke chain come last but the one that checks it: the first one runs the chain
    # while the other workers run tests of their own, rather than wait for it. The other tests that read the
    # chain (Kedro stages run in a copy: seconds each) come next, before the short unit tests: sorted last,
    # they were the end of the run, one worker running them while the other sat idle (21 s of a full run).
    def order(item) -> tuple[bool, bool, bool]:
        checks_it = item.name == "test_whole_chain_in_the_smoke_env"
        reads_it = "smoke_chain" in item.fixturenames and not checks_it
        slow = item.get_closest_marker("slow") is not None
        return not slow, reads_it == slow, not checks_it

    items.sort(key=order)


@pytest.fixture
def http_root(tmp_path):
    """A directory served over HTTP by Python's http.server, on a free port, for this test."""
    root = tmp_path / "served"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # a client that hung up early (a range probe)
            pass

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    # shutdown() waits for the loop's next poll: at the default half second, each test's teardown waited ~0.5 s.
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def s3_server():
    """An S3 API server (moto) on a free port that checks signatures, with a bucket and a user
    whose key may read it."""
    import boto3
    import requests
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    requests.post(f"{url}/moto-api/reset", timeout=10)  # moto keeps its state per process: start empty
    requests.post(f"{url}/moto-api/reset-auth", data=b"4", timeout=10)  # then signatures are checked
    admin = {
        "endpoint_url": url,
        "region_name": "us-east-1",
        "aws_access_key_id": "admin",
        "aws_secret_access_key": "admin",
    }
    iam = boto3.client("iam", **admin)
    iam.create_user(UserName="reader")
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=json.dumps(policy))
    credentials = {"key": key["AccessKeyId"], "secret": key["SecretAccessKey"],
                   "client_kwargs": {"endpoint_url": url, "region_name": "us-east-1"}}
    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=credentials["key"],
                      aws_secret_access_key=credentials["secret"])
    s3.create_bucket(Bucket="corpora")
    yield s3, credentials
    server.stop()
