"""The report in a real browser: headless Chromium (Debian's `chromium`; `.ci/run` installs it) loads
report.html offline with no console error, and the DOM it built has the front's points and table rows; a
serving run's report likewise, with its two serving pictures and a front table that fits 1,400 px."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
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


#: a browser start and a 2 MB page take 3-5 s on 2 idle cores; a loaded CI machine has taken over 60 s
BROWSER_TIMEOUT_S = 300


def browse(exe: str, url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                           *extra, url], capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)


def _rendered(exe: str, html: str, tmp_path: Path) -> str:
    """The DOM of the page ``html`` as Chromium renders it, its console captured (CAPTURE): asserts that the
    page loaded, the capture ran and no error reached the console."""
    page = tmp_path / "page.html"
    page.write_text(html.replace("<head>", "<head>" + CAPTURE, 1))
    proc = browse(exe, page.as_uri(), tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'id="__console"' in dom, "the capture script did not run"
    console = re.search(r'<pre id="__console">(.*?)</pre>', dom, flags=re.DOTALL).group(1)
    assert console == "", f"console errors: {console}"
    assert "Uncaught" not in proc.stderr, proc.stderr[-2000:]
    return dom


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return small_run(tmp_path_factory.mktemp("browser") / "run", trials=32)


def test_report_renders_in_chromium_without_errors(run_dir, tmp_path):
    exe = chromium()
    dom = _rendered(exe, (run_dir / "report.html").read_text(), tmp_path)
    front = pd.read_parquet(run_dir / "pareto.parquet")
    assert len(re.findall(r'<circle class="front"', dom)) == len(front)
    assert len(re.findall(r'<tr class="front-row">', dom)) == len(front)
    ms = re.search(r'id="render-ms">(\d+)<', dom)
    assert ms, "the page's load handler did not run"  # how fast it loads is a figure for docs/, not a test


def test_report_screenshot(run_dir, tmp_path):
    exe = chromium()
    shot = tmp_path / "shot.png"
    proc = browse(exe, (run_dir / "report.html").as_uri(), tmp_path / "profile", f"--screenshot={shot}",
                  "--window-size=1200,1800", "--hide-scrollbars")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a page, not a blank


#: run at load: for each colour kind (clicking its button where there are several), whether only its legend
#: shows and every legend swatch is the colour the page paints that group's points; the recommendation;
#: the front table's headers and whether it fits the window without scrolling
CHECKS = """<script>window.addEventListener('load',function(){var out={kinds:{}};
function check(kind){var r={shown:[],items:[]};
 document.querySelectorAll('.legend-kind').forEach(function(l){if(getComputedStyle(l).display!=='none')r.shown.push(l.dataset.kind);});
 var l=document.querySelector('.legend-'+kind);if(!l)return r;
 l.querySelectorAll('.item').forEach(function(it,code){var p=document.querySelector(
  'g.front circle[data-'+kind+'="'+code+'"],g.dominated circle[data-'+kind+'="'+code+'"]');
  r.items.push({group:it.dataset.group,swatch:getComputedStyle(it.querySelector('.sw')).backgroundColor,
   point:p?getComputedStyle(p).fill:null});});return r;}
var buttons=document.querySelectorAll('.facet-buttons button');
if(buttons.length){buttons.forEach(function(b){b.click();out.kinds[b.dataset.mode]=check(b.dataset.mode);});}
else{out.kinds.gpu=check('gpu');}
var rec=document.querySelector('p.recommend');out.rec=rec?rec.textContent:'';
out.recBottom=rec?rec.getBoundingClientRect().bottom:null;out.height=window.innerHeight;
var best=document.querySelector('table[class~=sortable] tr[class^=best-]');out.bestTop=best?best.getBoundingClientRect().top:null;
var why=document.querySelector('p.why');out.why=why?why.textContent:'';
var cav=document.querySelector('p.caveat');out.caveat=cav?cav.textContent:'';
out.axes=Array.prototype.map.call(document.querySelectorAll('svg text.axis'),function(a){return a.textContent;});
out.recRow=(document.querySelector('table.front td.rec')||{}).textContent||'';
out.headers=Array.prototype.map.call(document.querySelectorAll('table.front th'),function(h){return h.textContent;});
var t=document.querySelector('table.front');out.right=t.getBoundingClientRect().right;
out.width=document.documentElement.clientWidth;out.scroll=[t.parentElement.scrollWidth,t.parentElement.clientWidth];
var pre=document.createElement('pre');pre.id='__checks';pre.textContent=JSON.stringify(out);document.body.appendChild(pre);
});</script>"""


def _checks(exe: str, html: str, tmp_path: Path) -> dict:
    import html as markup
    import json

    page = tmp_path / "checks.html"
    page.write_text(html.replace("<head>", "<head>" + CHECKS, 1))
    proc = browse(exe, page.as_uri(), tmp_path / "profile", "--dump-dom", "--window-size=1400,1000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="__checks">(.*?)</pre>', proc.stdout, flags=re.DOTALL)
    assert found, "the check script did not run"
    return json.loads(markup.unescape(found.group(1)))


def test_the_buyer_view_in_chromium(run_dir, tmp_path):
    """A real sweep of four GPUs: the per-GPU legend shows with the colours its points have, the
    recommended design is named and marked in the table, capex is a column, the table fits 1,400 px."""
    exe = chromium()
    got = _checks(exe, (run_dir / "report.html").read_text(), tmp_path)
    gpu = got["kinds"]["gpu"]
    assert gpu["shown"] == ["gpu"]
    trials = pd.read_parquet(run_dir / "trials")
    assert sorted(i["group"] for i in gpu["items"]) == sorted(trials["gpu"].unique())
    assert all(i["point"] == i["swatch"] for i in gpu["items"]), gpu["items"]
    assert len({i["swatch"] for i in gpu["items"]}) == len(gpu["items"])  # one colour per GPU
    # the first screen (1,400 x 1,000): the decision in one sentence, with the GPU, its count, the precision,
    # owned or rented and the objectives' 80% intervals, then the best design per GPU; the plots after
    from dse.report.buyer import recommend
    from dse.report.data import load_run

    row = recommend(load_run(run_dir)).row
    assert got["rec"].startswith(f"Recommended: {int(row['n_gpus']):,} × {row['gpu']}, owned, {row['precision']}, dp ")
    assert got["rec"].count("(80% interval ") == 2 and "time to train" in got["rec"] and "run cost $" in got["rec"]
    assert got["recBottom"] <= 1000 and got["bestTop"] < 1000, got  # the window is 1,000 px high
    assert "deadline of 60 days" in got["why"]  # small.yaml: <= 60 days; why, after the tables
    assert got["recRow"].startswith("★ ") and got["recRow"][2:].split(" and ")[0].strip() in got["why"]
    assert got["axes"] and not [a for a in got["axes"] if "_" in a or "(min)" in a], got["axes"]  # display names
    assert {"Capex ($)", "Run cost ($)", "Lifetime cost ($)"} <= set(got["headers"]), got["headers"]
    assert got["right"] <= got["width"] and got["scroll"][0] <= got["scroll"][1], got  # no horizontal scroll


def test_colour_kinds_switch_in_chromium(tmp_path):
    """A table of owned and rented designs: the buttons switch GPU, provider and instance colours."""
    from test_buyer import _run_dir

    from dse.report import write_report

    exe = chromium()
    paths = write_report(_run_dir(tmp_path / "run"), with_sensitivity=False, with_png=False)
    got = _checks(exe, paths["html"].read_text(), tmp_path)
    assert set(got["kinds"]) == {"gpu", "provider", "instance"}
    no_feasible = {"gpu": set(), "provider": {"azure"}, "instance": {"azure-nd-h100-v5"}}  # spot, past 120 days
    for kind, found in got["kinds"].items():
        assert found["shown"] == [kind]
        assert {i["group"] for i in found["items"] if i["point"] is None} == no_feasible[kind]  # its point is grey
        assert all(i["point"] == i["swatch"] for i in found["items"] if i["point"] is not None), (kind, found)
    assert [i["group"] for i in got["kinds"]["provider"]["items"]] == ["owned", "aws", "azure", "gcp"]
    assert {"Capex ($)", "Run cost ($)", "Lifetime cost ($)"} <= set(got["headers"])


@pytest.fixture(scope="module")
def serving_dir(tmp_path_factory) -> Path:
    """The DeepSeek-R1 serving space's whole grid: aggregated and disaggregated designs, the widest table."""
    from test_report_serving import serving_run

    return serving_run(tmp_path_factory.mktemp("browser") / "serving", "serving-deepseek-r1.yaml", trials=None)


def test_serving_report_in_chromium(serving_dir, tmp_path):
    """No console error; both serving pictures drawn with every design and their fronts; the per-GPU colours
    as the legend says; the recommendation speaks serving; the front table fits 1,400 px."""
    from dse.report.data import load_run

    exe = chromium()
    html = (serving_dir / "report.html").read_text()
    dom = _rendered(exe, html, tmp_path)
    designs = len(load_run(serving_dir).trials)
    for key in ("throughput", "cost"):
        figure = re.search(rf'<figure class="view" id="view-{key}">(.*?)</figure>', dom, flags=re.DOTALL)
        assert figure, f"no {key} picture in the DOM"
        assert figure.group(1).count("<circle ") == designs and '<circle class="front"' in figure.group(1)
    got = _checks(exe, html, tmp_path)
    gpu = got["kinds"]["gpu"]
    assert all(i["point"] == i["swatch"] for i in gpu["items"]), gpu["items"]
    assert got["rec"].startswith("Recommended: ") and "cost per M output tokens $" in got["rec"]
    assert "TPOT" in got["rec"] and "(80% interval " in got["rec"] and got["recBottom"] <= 1000
    # every front design is disaggregated since the prefill pool is searched: serving is said once, beside the
    # table; the prefill pool's GPUs are a column, or said there once where every pool has the same
    assert {"TTFT (ms)", "TPOT (ms)", "Speed per user (tokens/s)", "Throughput per GPU (output tokens/s)",
            "Cost per M output tokens ($)"} <= set(got["headers"]), got["headers"]
    note = re.search(r"Every front design has (.*?)\.</p>", html).group(1)
    assert "Prefill GPUs (count)" in got["headers"] or "prefill GPUs <b>" in note
    assert got["right"] <= got["width"] and got["scroll"][0] <= got["scroll"][1], got  # no horizontal scroll
