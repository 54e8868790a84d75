"""The report in a real browser: headless Chromium (Debian's `chromium`; `.ci/run` installs it) loads
report.html offline with no console error, and the DOM it built has the front's points and table rows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from test_report import small_run

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions"]
#: put first in <head>: every console error and uncaught exception lands in a marker element
CAPTURE = """<script>(function(){var errs=[];function put(m){errs.push(String(m));
var e=document.getElementById('__console');if(e)e.textContent=errs.join('\\n');}
window.addEventListener('error',function(ev){put('Uncaught '+ev.message);});
var ce=console.error;console.error=function(){put(Array.prototype.join.call(arguments,' '));ce.apply(console,arguments);};
document.addEventListener('DOMContentLoaded',function(){var p=document.createElement('pre');p.id='__console';
p.textContent=errs.join('\\n');document.body.appendChild(p);});})();</script>"""


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.environ.get("CI") == "true":  # .ci/run installs it: missing there is a failure
        pytest.fail("chromium is missing under CI: .ci/run should have installed it (apt-get install -y chromium)")
    pytest.skip("chromium is missing: install it with `apt-get install -y chromium` to run the browser test")


def browse(exe: str, url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                           *extra, url], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return small_run(tmp_path_factory.mktemp("browser") / "run", trials=32)


def test_report_renders_in_chromium_without_errors(run_dir, tmp_path):
    exe = chromium()
    html = (run_dir / "report.html").read_text()
    page = tmp_path / "page.html"
    page.write_text(html.replace("<head>", "<head>" + CAPTURE, 1))
    t0 = time.perf_counter()
    proc = browse(exe, page.as_uri(), tmp_path / "profile", "--dump-dom")
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'id="__console"' in dom, "the capture script did not run"
    console = re.search(r'<pre id="__console">(.*?)</pre>', dom, flags=re.DOTALL).group(1)
    assert console == "", f"console errors: {console}"
    assert "Uncaught" not in proc.stderr, proc.stderr[-2000:]
    front = pd.read_parquet(run_dir / "pareto.parquet")
    assert len(re.findall(r'<circle class="front"', dom)) == len(front)
    assert len(re.findall(r'<tr class="front-row">', dom)) == len(front)
    ms = re.search(r'id="render-ms">(\d+)<', dom)
    assert ms, "the page's load handler did not run"
    assert int(ms.group(1)) < 3000 and wall < 30


def test_report_screenshot(run_dir, tmp_path):
    exe = chromium()
    shot = tmp_path / "shot.png"
    proc = browse(exe, (run_dir / "report.html").as_uri(), tmp_path / "profile", f"--screenshot={shot}",
                  "--window-size=1200,1800", "--hide-scrollbars")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a page, not a blank
