"""The run report in a real browser: headless Chromium renders an English and a Chinese report,
with the system's CJK font and without any (a fontconfig that knows only matplotlib's DejaVu
fonts), and the rendered page says what it should, with no "None" anywhere."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib
import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from bert_mlm.core.record.report import page

from .test_report import finetuned, history, metrics, run_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium: .ci/run installs Debian's chromium (apt-get install "
                                                "chromium)"),
]


def cjk_font_installed() -> bool:
    fc_list = shutil.which("fc-list")
    return bool(fc_list and subprocess.run([fc_list, ":lang=zh", "family"], capture_output=True, text=True).stdout)


@pytest.fixture(scope="module")
def no_cjk_font(tmp_path_factory) -> dict:
    """An environment whose fontconfig knows matplotlib's DejaVu fonts only: no CJK glyphs."""
    root = tmp_path_factory.mktemp("fonts")
    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    (root / "fonts.conf").write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">'
        f"<fontconfig><dir>{fonts}</dir><cachedir>{root / 'cache'}</cachedir></fontconfig>")
    environment = {"FONTCONFIG_FILE": str(root / "fonts.conf")}
    # The font cache built before any page is drawn: a first render that built it itself, on a busy
    # machine, once drew one character otherwise than the next (the suite under -n 4).
    fc_cache = shutil.which("fc-cache")
    if fc_cache:
        subprocess.run([fc_cache], env={**os.environ, **environment}, capture_output=True, timeout=120)
    return environment


def render(document: str, directory: Path, env: dict | None = None, size: str = "1200,3000",
           dom: bool = True) -> tuple[str, Path]:
    """The page's DOM after rendering (with ``dom``), and a screenshot of it."""
    source = directory / "page.html"
    source.write_text(document, encoding="utf-8")
    screenshot = directory / "page.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={directory / 'profile'}",
             f"--window-size={size}", "--hide-scrollbars",
             # A screenshot of the page once it is laid out and idle: on a loaded machine (the suite beside a
             # benchmark) one glyph was once drawn before the font fallback had settled.
             "--run-all-compositor-stages-before-draw", "--virtual-time-budget=2000"]
    environment = {**os.environ, **(env or {})}
    # One start of the browser for both (headless Chromium runs every command it is given; a start is ~1 s). The
    # glyphs, compared pixel for pixel, are drawn by a start that takes the screenshot alone, as they always were.
    dump = ["--dump-dom"] if dom else []
    dom_text = subprocess.run([CHROMIUM, *flags, *dump, f"--screenshot={screenshot}", source.as_uri()],
                              capture_output=True, text=True, timeout=120, env=environment).stdout
    return dom_text, screenshot


def text_of(dom: str) -> str:
    body = re.sub(r"<style.*?</style>|<script.*?</script>", "", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r'src="data:[^"]*"', "", body))).split())


def english_report() -> str:
    trials = pd.DataFrame({"number": [0, 1, 2], "state": ["COMPLETE", "PRUNED", "COMPLETE"],
                           "params_probability": [0.15, 0.2, 0.3], "value": [6.6, None, 6.5],
                           "last_intermediate_value": [6.6, 9.1, 6.5], "duration_seconds": [12.0, 4.0, 12.5]})
    values = {**finetuned(metrics()), "tuning_decision": "within seed noise: the configured masking is kept",
              "fill_mask_examples": [{"sentence": "Return a new [MASK] of the list .",
                                      "predictions": [{"token": "copy", "score": 0.31}], "answer": "copy",
                                      "answer_rank": 1}]}
    return run_report(values, history(), tuning_trials=trials)


def chinese_report() -> str:
    values = {**metrics(), "mask_probability_source": "parameters", "tuning_decision": None,
              "fill_mask_examples": [{"sentence": "在成功时更需[MASK]谦卑 。", "answer": "要", "answer_rank": 2,
                                      "predictions": [{"token": "的", "score": 0.2}, {"token": "要", "score": 0.1}]},
                                     {"sentence": "房间 很 干净 ， 服务 也 [MASK] 好 。", "answer": "很",
                                      "answer_rank": 1, "predictions": [{"token": "很", "score": 0.3}]}]}
    return run_report(values, history(), tuning_trials=pd.DataFrame(columns=["number", "state", "value"]))


@pytest.mark.parametrize("font", ["system CJK font", "no CJK font"])
@pytest.mark.parametrize("language", ["English", "Chinese"])
def test_the_report_renders_in_chromium(language, font, tmp_path, no_cjk_font):
    if font == "system CJK font" and not cjk_font_installed():
        pytest.skip("no CJK font installed (Debian: apt-get install fonts-noto-cjk)")
    document = english_report() if language == "English" else chinese_report()
    dom, screenshot = render(document, tmp_path, None if font == "system CJK font" else no_cjk_font)
    text = text_of(dom)
    assert "bert-mlm run report" in text and "None" not in text
    assert screenshot.is_file() and screenshot.stat().st_size > 20_000
    assert "Every value, with its standard error, is in metrics.json." in text
    if language == "English":
        assert "fine-tuned accuracy 0.851 vs 0.844" in text and "majority class 0.669" in text
        assert "Return a new [MASK] of the list. → copy" in text
        assert len(re.findall(r'<img alt="tuning trials"', dom)) == 1
    else:
        assert "tuning skipped (tuning.n_trials=0)" in text
        assert "在成功时更需[MASK]谦卑。 → 的" in text and "房间很干净，服务也[MASK]好。" in text
        assert '<li lang="zh">' in dom


def glyphs(characters: str, directory: Path, env: dict | None) -> list[np.ndarray]:
    """Each character drawn alone, large, with the report's own style: the pixels of each."""
    pictures = []
    for index, character in enumerate(characters):
        folder = directory / str(index)
        folder.mkdir(parents=True)
        document = page("", [("", f'<p lang="zh" style="font-size:96px;margin:0">{character}</p>')])
        _, screenshot = render(document, folder, env, size="300,300", dom=False)
        pictures.append(matplotlib.image.imread(screenshot))
    return pictures


def test_chinese_is_drawn_with_the_installed_cjk_font_and_as_boxes_without_one(tmp_path, no_cjk_font):
    """What README's line on fonts-noto-cjk is for: without a CJK font every character is the same
    box; with one, the report's font-family list reaches it and characters differ."""
    without = glyphs("房店", tmp_path / "without", no_cjk_font)
    assert np.array_equal(without[0], without[1])  # both the same empty box ("tofu")
    if not cjk_font_installed():
        pytest.skip("no CJK font installed (Debian: apt-get install fonts-noto-cjk)")
    with_font = glyphs("房店", tmp_path / "with", None)
    assert not np.array_equal(with_font[0], with_font[1])
