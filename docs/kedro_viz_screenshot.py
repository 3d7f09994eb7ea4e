"""Refresh docs/kedro-viz.png: `kedro viz build --include-previews` of a scratch copy of the
project (data stages stored, so that their previews exist), rendered in headless Chromium.

    .venv/bin/python docs/kedro_viz_screenshot.py      (needs chromium)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from bert_mlm.scratch import scratch_project

ROOT = Path(__file__).resolve().parents[1]
# Kedro-Viz opens a feature-hint tour over a quarter of the graph on a first visit; a returning
# user has it off. The sidebar and minimap are hidden so that the graph gets the width.
VIEWER_STATE = '{"showFeatureHints": false, "visible": {"sidebar": false, "miniMap": false}}'


def main() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        sys.exit("no chromium on PATH")
    kedro = str(Path(sys.executable).with_name("kedro"))
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}
    with tempfile.TemporaryDirectory() as scratch:
        project = scratch_project(scratch, ROOT)
        subprocess.run([kedro, "run", "--env", "smoke", "--pipelines", "ingestion,tokenization,sequences"],
                       cwd=project, env=env, check=True, capture_output=True)
        subprocess.run([kedro, "viz", "build", "--include-previews"], cwd=project, env=env, check=True, capture_output=True)
        index = project / "build" / "index.html"
        preset = f"<script>localStorage.setItem('KedroViz', '{VIEWER_STATE}')</script>"
        index.write_text(index.read_text().replace("<head>", f"<head>{preset}", 1))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                   "--directory", str(project / "build")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--disable-background-networking", f"--user-data-dir={scratch}/profile",
                            "--window-size=1100,1500", "--virtual-time-budget=20000",
                            f"--screenshot={ROOT / 'docs' / 'kedro-viz.png'}", f"http://127.0.0.1:{port}/"],
                           check=True, capture_output=True, timeout=300)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(f"wrote {ROOT / 'docs' / 'kedro-viz.png'}")


if __name__ == "__main__":
    main()
