"""A real two-node local Ray cluster with token authentication on (``ray start --head`` on loopback plus a
second worker node, both with ``RAY_AUTH_MODE=token`` and the cluster's token), driven by ``dse sweep
--address`` in subprocesses that are given the token only (``RAY_AUTH_TOKEN``, or ``~/.ray/auth_token``),
never ``RAY_AUTH_MODE``: an actor killed mid-run is replaced and its chunk re-run; a driver killed with
SIGKILL mid-run is finished by ``dse sweep --resume`` with the same front as an uninterrupted run of the
same seed; ``ray job submit`` runs a sweep on the cluster; a missing or wrong token is one line and exit 2.

The cluster has its own ``--temp-dir``, ``HOME`` and ports and is stopped in the fixture's teardown, also
when a test fails: every process that carries its ``DSE_TEST_RAY`` mark (the nodes, the drivers, ``ray job
submit``) and their descendants, killed by PID (``ray stop`` would stop every Ray of this user). The
session's embedded Ray (``conftest.ray_session``) is never touched.
"""

from __future__ import annotations

import os
import secrets
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
  - {metric: run_cost_usd, direction: min}
constraints: ["time_to_train_days <= 60"]
search: {sampler: nsga2, trials: 320, batch_size: 16, seed: 7}
"""
DESIGN = ["gpu", "n_gpus", "precision", "gpu_hbm_tbyte_s", "nic_gbyte_s"]
OBJ = ["time_to_train_days", "run_cost_usd"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Ray's token-authentication variables (docs.ray.io, ray-security/token-auth)
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _env(tmp: Path, **extra: str) -> dict:
    """This cluster's environment: its mark, temp dir and an empty HOME (no ~/.ray/auth_token of the
    user's), no Ray address or authentication setting inherited; ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", *AUTH_VARS)}
    # DSE_TEST_RAY marks every process of this cluster (inherited): the teardown kills exactly those
    env.update(DSE_TEST_RAY=str(tmp), RAY_TMPDIR=str(tmp), HOME=str(tmp / "home"), PYTHONPATH=str(ROOT),
               RAY_USAGE_STATS_ENABLED="0")
    env.update(extra)
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
    """The two nodes, token-authenticated: ``RAY_AUTH_MODE=token`` and the token in their environment
    (a joining node asks for and presents the token only in token mode). Yields the address, the
    dashboard's URL (``ray job submit``), the token and a driver's environment (the token alone)."""
    if not Path(RAY).exists():
        pytest.skip("the ray command line is not installed in this environment")
    tmp = Path(tempfile.mkdtemp(prefix="dse-ray-", dir="/tmp"))  # short: Ray's socket paths are limited
    (tmp / "home").mkdir()
    token = secrets.token_hex(32)
    ports = set()
    while len(ports) < 5:  # distinct: the GCS, the dashboard, Ray Client, each node's dashboard agent
        ports.add(_free_port())
    port, dashboard, client, agent_head, agent_worker = sorted(ports)
    nodes = _env(tmp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    common = ["--num-cpus=1", f"--temp-dir={tmp}", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
    try:
        subprocess.run([RAY, "start", "--head", f"--port={port}", "--dashboard-host=127.0.0.1",
                        f"--dashboard-port={dashboard}", f"--ray-client-server-port={client}",
                        f"--dashboard-agent-listen-port={agent_head}", *common],
                       env=nodes, check=True, capture_output=True, timeout=180)
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", f"--dashboard-agent-listen-port={agent_worker}",
                        *common], env=nodes, check=True, capture_output=True, timeout=180)
        yield {"address": f"127.0.0.1:{port}", "dashboard": f"http://127.0.0.1:{dashboard}", "token": token,
               "nodes_env": nodes, "env": _env(tmp, RAY_AUTH_TOKEN=token), "tmp": tmp}
    finally:
        _kill_cluster(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def _token_file_env(cluster, home: Path) -> dict:
    """A driver's environment whose token is in ``HOME/.ray/auth_token`` (written with a newline, as
    ``echo`` writes it), not in the environment."""
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(cluster["token"] + "\n")
    return _env(cluster["tmp"], HOME=str(home))


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
                                cluster["address"], "--quiet"], cwd=ROOT, env=_token_file_env(cluster, tmp_path / "home"),
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


@pytest.mark.parametrize("case", ["missing", "wrong", "wrong file", "mode disabled"])
def test_a_missing_or_wrong_token_is_one_line(cluster, tmp_path, case):
    """The cluster asks for its token: without it, with another one (from RAY_AUTH_TOKEN or from the file
    RAY_AUTH_TOKEN_PATH names), or with RAY_AUTH_MODE=disabled here, the driver stops in one line that
    names what to set, with exit status 2, before it joins."""
    bad = tmp_path / "bad-token"
    bad.write_text("0" * 64)
    extra = {"missing": {}, "wrong": {"RAY_AUTH_TOKEN": "0" * 64}, "wrong file": {"RAY_AUTH_TOKEN_PATH": str(bad)},
             "mode disabled": {"RAY_AUTH_TOKEN": cluster["token"], "RAY_AUTH_MODE": "disabled"}}[case]
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    proc = subprocess.run([*DSE, "sweep", str(space), "--address", cluster["address"], "--quiet", "--out",
                           str(tmp_path / "run")], cwd=ROOT, env=_env(cluster["tmp"], **extra), capture_output=True,
                          text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    prefix = f"dse sweep: error: --address: the Ray cluster at {cluster['address']} "
    expected = {"missing": "requires its authentication token and none was found: set RAY_AUTH_TOKEN",
                "wrong": "refused the authentication token from RAY_AUTH_TOKEN: set RAY_AUTH_TOKEN",
                "wrong file": f"refused the authentication token from RAY_AUTH_TOKEN_PATH={bad}: set RAY_AUTH_TOKEN",
                "mode disabled": "requires its authentication token, and RAY_AUTH_MODE=disabled here forbids"}[case]
    assert lines[0].startswith(prefix + expected), lines[0]
    assert not list((tmp_path / "run").glob("trials/part-*.parquet"))


def test_ray_job_submit_runs_a_sweep_on_the_cluster(cluster, tmp_path):
    """``ray job submit`` presents the token in token mode (RAY_AUTH_MODE=token and the token, as the
    README says); the job's driver joins the two nodes through the RAY_ADDRESS the job sets, and scores
    the same 32 trials as ``--no-ray`` in this process for the same seed."""
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    job = subprocess.run([RAY, "job", "submit", "--address", cluster["dashboard"], "--", sys.executable, "-m",
                          "dse.cli", "sweep", str(space), "--trials", "32", "--out", str(tmp_path / "job")],
                         cwd=ROOT, env=_env(cluster["tmp"], RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=cluster["token"]),
                         capture_output=True, text=True, timeout=300)
    assert job.returncode == 0 and "succeeded" in job.stdout, job.stdout[-3000:] + job.stderr[-3000:]
    assert "32 designs on 2 Ray actors (Ray cluster at " in job.stdout, job.stdout[-3000:]
    local = subprocess.run([*DSE, "sweep", str(space), "--trials", "32", "--no-ray", "--quiet", "--out",
                            str(tmp_path / "local")], cwd=ROOT, env=_env(cluster["tmp"]), capture_output=True,
                           text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    ran, want = (pd.read_parquet(tmp_path / name / "trials").sort_values("trial").reset_index(drop=True)
                 for name in ("job", "local"))
    assert ran["trial"].tolist() == list(range(32))
    pd.testing.assert_frame_equal(ran[DESIGN + OBJ], want[DESIGN + OBJ], check_dtype=False)
