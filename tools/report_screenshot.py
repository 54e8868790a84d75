"""Write docs/report.png: the first screen (1,400 x 1,000) of a report, as headless Chromium draws it.

    python tools/report_screenshot.py                 # sweeps spaces/default.yaml into a temporary directory
    python tools/report_screenshot.py RUN_DIR [--out docs/report.png]

Chromium is Debian's ``chromium`` (``.ci/run`` installs it; tests/test_report_browser.py uses the same).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the first screen a reviewer sees: what the issue "The reader's first minute" sizes the page for
WINDOW = "1400,1000"


def screenshot(html: Path, out: Path) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("report_screenshot: chromium is missing (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                        f"--user-data-dir={profile}", f"--window-size={WINDOW}", f"--screenshot={out.resolve()}",
                        html.resolve().as_uri()], check=True, capture_output=True, timeout=300)
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", nargs="?", help="a run directory with report.html (default: sweep spaces/default.yaml)")
    p.add_argument("--out", default=str(ROOT / "docs" / "report.png"))
    args = p.parse_args()
    if args.run:
        html = Path(args.run) / "report.html"
        screenshot(html, Path(args.out))
        return
    from dse.spec import load_spec
    from dse.sweep import run

    with tempfile.TemporaryDirectory() as where:
        result = run(load_spec(ROOT / "spaces" / "default.yaml"), run_dir=Path(where) / "default", use_ray=False)
        screenshot(result.run_dir / "report.html", Path(args.out))


if __name__ == "__main__":
    main()
