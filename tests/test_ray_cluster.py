"""A real two-node local Ray cluster (``ray start --head`` on loopback plus a second worker node), driven by
``dse sweep --address`` in subprocesses: an actor killed mid-run is replaced and its chunk re-run, and a
driver killed with SIGKILL mid-run is finished by ``dse sweep --resume`` with the same front as an
uninterrupted run of the same seed.

The cluster has its own ``--temp-dir`` and port and is stopped (every process that carries its
``DSE_TEST_RAY`` mark, killed by PID) in the fixture's teardown; the drivers run as subprocesses, so the session's embedded Ray
(``conftest.ray_session``) is never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")
DSE = [sys.executable, "-m", "dse.cli"]

SPACE = """\
name: cluster-test
workload: {model: llama3-8b, train_tokens: 1e12, global_batch: 512, seq_len: 8192}
cluster:
  gpu: [a100-sxm-80gb, h100-sxm, h200-sxm, b200]
  n_gpus: {min: 32, max: 2048, scale: pow2}
  precision: [bf16, fp8]
  gpu_hbm_tbyte_s: {min: 2.0, max: 8.0, step: 0.5}
  nic_gbyte_s: [12.5, 25, 50, 100]
mapping: auto
objectives:
  - {metric: time_to_train_days, direction: min}
  - {metric: tco_usd, direction: min}
constraints: ["time_to_train_days <= 60"]
search: {sampler: nsga2, trials: 320, batch_size: 16, seed: 7}
"""
DESIGN = ["gpu", "n_gpus", "precision", "gpu_hbm_tbyte_s", "nic_gbyte_s"]
OBJ = ["time_to_train_days", "tco_usd"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    # DSE_TEST_RAY marks every process of this cluster (inherited): the teardown kills exactly those
    env.update(DSE_TEST_RAY=str(tmp), RAY_TMPDIR=str(tmp), PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    return env


def _kill_cluster(tmp: Path) -> int:
    """SIGKILL every process started with this cluster's DSE_TEST_RAY mark and their descendants (Ray's
    agents clear their environment); a plain ``ray stop --force`` would also stop any other Ray of this
    user (the session's embedded one)."""
    mark = f"DSE_TEST_RAY={tmp}".encode()
    me, killed = os.getpid(), set()
    for _ in range(3):
        parent: dict[int, int] = {}
        ours: set[int] = set()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == me:
                continue
            try:
                parent[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    ours.add(int(proc.name))
            except (OSError, ValueError, IndexError):
                pass
        grown = True
        while grown:  # descendants of our processes are ours
            more = {p for p, pp in parent.items() if pp in ours and p not in ours}
            ours |= more
            grown = bool(more)
        for pid in ours:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        time.sleep(0.5)
    return len(killed)


@pytest.fixture(scope="module")
def cluster():
    if not Path(RAY).exists():
        pytest.skip("the ray command line is not installed in this environment")
    tmp = Path(tempfile.mkdtemp(prefix="dse-ray-", dir="/tmp"))  # short: Ray's socket paths are limited
    port = _free_port()
    env = _env(tmp)
    common = ["--num-cpus=1", f"--temp-dir={tmp}", "--disable-usage-stats"]
    try:
        subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                        "--include-dashboard=false", *common], env=env, check=True, capture_output=True, timeout=120)
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1", *common],
                       env=env, check=True, capture_output=True, timeout=120)
        yield {"address": f"127.0.0.1:{port}", "env": env, "tmp": tmp}
    finally:
        _kill_cluster(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def _sweep(cluster, *args, **kw) -> subprocess.Popen:
    return subprocess.Popen([*DSE, "sweep", *args, "--address", cluster["address"], "--quiet"], cwd=ROOT,
                            env=cluster["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _parts(run_dir: Path) -> int:
    return len(list((run_dir / "trials").glob("part-*.parquet")))


def _scorer_pids(cluster) -> list[int]:
    """PIDs of this cluster's dse scoring actors on either node (Ray titles them ``ray::_Scorer``)."""
    mark = f"DSE_TEST_RAY={cluster['tmp']}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(b"ray::_Scorer") \
                    and mark in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except OSError:
            pass
    return sorted(pids)


def _front(run_dir: Path) -> pd.DataFrame:
    front = pd.read_parquet(run_dir / "pareto.parquet")
    return front[DESIGN + OBJ].sort_values(DESIGN).reset_index(drop=True)


def test_two_node_cluster_survives_an_actor_kill_and_a_driver_kill(cluster, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    t0 = time.time()
    straight = _sweep(cluster, str(space), "--out", str(tmp_path / "straight"))
    _, err = straight.communicate(timeout=300)
    assert straight.returncode == 0, err
    t_straight = time.time() - t0

    # an actor killed mid-run: Ray restarts it and re-runs its chunk; no trial lost or told twice
    t0 = time.time()
    proc = _sweep(cluster, str(space), "--out", str(tmp_path / "actor"))
    killed = None
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if _parts(tmp_path / "actor") >= 2:
            pids = _scorer_pids(cluster)
            if pids:
                killed = pids[0]
                os.kill(killed, signal.SIGKILL)
                break
        time.sleep(0.02)
    _, err = proc.communicate(timeout=300)
    assert killed is not None, "no scoring actor found to kill"
    assert proc.returncode == 0, err
    t_actor = time.time() - t0

    # the driver killed with SIGKILL after some batches, then resumed
    t0 = time.time()
    proc = _sweep(cluster, str(space), "--out", str(tmp_path / "driver"))
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and _parts(tmp_path / "driver") < 4:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    committed = _parts(tmp_path / "driver")
    assert 4 <= committed < 20
    resumed = subprocess.Popen([*DSE, "sweep", "--resume", str(tmp_path / "driver"), "--address",
                                cluster["address"], "--quiet"], cwd=ROOT, env=cluster["env"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    t_driver = time.time() - t0

    base = pd.read_parquet(tmp_path / "straight" / "trials")
    for name in ("actor", "driver"):
        frame = pd.read_parquet(tmp_path / name / "trials").sort_values("trial").reset_index(drop=True)
        assert frame["trial"].tolist() == list(range(320)), name  # none lost, none twice
        pd.testing.assert_frame_equal(base.sort_values("trial").reset_index(drop=True)[DESIGN + OBJ],
                                      frame[DESIGN + OBJ], check_dtype=False)
        pd.testing.assert_frame_equal(_front(tmp_path / "straight"), _front(tmp_path / name), check_dtype=False)
    print(f"\ntwo-node Ray: uninterrupted {t_straight:.1f}s, actor killed {t_actor:.1f}s, "
          f"driver killed after {committed} parts + resume {t_driver:.1f}s")
