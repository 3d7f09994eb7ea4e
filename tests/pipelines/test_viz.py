"""kedro-viz: the static build works (with previews) and renders the chain in a real browser."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock
from kedro.framework.startup import bootstrap_project

from tests.kedro_runs import DEFAULT_CHAIN_NODES as TASKS
from tests.kedro_runs import copy_project

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def viz_build(tmp_path_factory, smoke_chain) -> Path:
    """What `kedro viz build --include-previews` builds (:func:`build_viz`), in a copy of the shared smoke
    chain's project: its stored datasets, so that the previews of the data path's datasets are built too. Built
    once for the suite: the two tests that read it run on different xdist workers, which share the build under a
    file lock (as the smoke chain, tests/kedro_runs.py) rather than build it once each."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "viz-build"
    with FileLock(f"{folder}.lock"):
        if (folder / "failed").exists():
            pytest.fail(f"the shared kedro-viz build failed: {(folder / 'failed').read_text()}")
        if not (folder / "done").exists():
            folder.mkdir(exist_ok=True)
            try:
                build_viz(smoke_chain, folder)
            except BaseException as error:
                (folder / "failed").write_text(f"{type(error).__name__}: {error}"[:3000])
                raise
            (folder / "done").touch()
    return folder / "project" / "build"


def build_viz(smoke_chain: Path, folder: Path) -> None:
    """What `kedro viz build --include-previews` runs (kedro_viz.launchers.cli.utils._load_and_deploy_viz), in this
    process: the command runs it in a process of its own, which spent ~5 s importing torch, transformers and Kedro
    again. Its warnings are read from kedro-viz's loggers."""
    from kedro_viz.integrations.deployment.deployer_factory import DeployerFactory
    from kedro_viz.server import load_and_populate_data

    root = copy_project(smoke_chain, folder)
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    viz_logger = logging.getLogger("kedro_viz")
    viz_logger.addHandler(handler)
    try:
        with pytest.MonkeyPatch.context() as patched:
            patched.chdir(root)
            bootstrap_project(root)
            load_and_populate_data(root, include_hooks=False, package_name="bert_mlm")
            DeployerFactory.create_deployer("local").deploy(True)
    finally:
        viz_logger.removeHandler(handler)
    output = log.getvalue()
    assert (root / "build" / "api" / "main").is_file(), output[-3000:]
    assert "circular dependency" not in output, output[-3000:]  # else kedro-viz hides the layers
    # Datasets no run wrote (the mask-rate variants') preview nothing: no warning each
    assert "could not be previewed" not in output, output[-3000:]


@pytest.mark.slow
def test_static_build_holds_the_chain(viz_build):
    graph = json.loads((viz_build / "api" / "main").read_text())
    tasks = [n["name"] for n in graph["nodes"] if n["type"] == "task"]
    # kedro-viz lists the nodes as it meets them in the registered pipelines (tuning's come with the
    # reporting nodes that follow it), not in the order they run: the data stages first, then all the others once.
    assert tasks[:6] == TASKS[:6] and sorted(tasks) == sorted(TASKS)
    layers = {n.get("layer") for n in graph["nodes"] if n["type"] == "data"}
    assert {"raw", "intermediate", "feature", "model_input", "models", "model_output", "reporting"} <= layers
    assert {t["id"] for t in graph["tags"]} >= {
        "ingestion",
        "tokenization",
        "sequences",
        "tuning",
        "training",
        "evaluation",
        "reporting",
    }
    # The data path's directory datasets show a table preview of what they hold.
    details = [json.loads(p.read_text()) for p in (viz_build / "api" / "nodes").iterdir()]
    previews = {d["type"].rsplit(".", 1)[-1]: d.get("preview") for d in details if d.get("type")}
    assert previews["TokenStoreDataset"]["columns"][:3] == ["split", "documents", "tokens"]
    assert [row[-2] for row in previews["TokenStoreDataset"]["data"]] == ["uint16"] * 3
    assert previews["DocumentShardsDataset"]["columns"] == ["source", "text"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None,
                    reason="no chromium: .ci/run installs Debian's chromium (apt-get install chromium)")
def test_the_graph_renders_in_headless_chromium(viz_build, tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=viz_build, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        screenshot = tmp_path / "kedro-viz.png"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1600,1000", "--virtual-time-budget=20000"]
        url = f"http://127.0.0.1:{port}/"
        # One browser for both: headless Chromium dumps the DOM and takes the screenshot of the same page load.
        dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", f"--screenshot={screenshot}", url], capture_output=True,
                             text=True, timeout=180).stdout
    finally:
        server.terminate()
        server.wait(timeout=10)
    rendered = dom.lower()
    for task in TASKS:
        # kedro-viz shows pretty names ("Clean And Split Corpus") by default.
        assert task in rendered or task.replace("_", " ") in rendered, task
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000
