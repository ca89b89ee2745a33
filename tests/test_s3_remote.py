"""DVC's S3 remote (dvc-s3) against a local S3 (moto_server): push from one checkout, pull into a fresh clone.

The credentials live only in `.dvc/config.local` (never committed); the clone gets every artefact
back byte for byte, and then neither `dvc repro` nor Snakemake has anything left to do.
"""

from __future__ import annotations

import importlib.util
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import mirror_dir, unavailable
from workspace import artefacts, copy_workspace, dvc_ran, fast_dvc_run, sh, snakemake_planned

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
BUCKET, REMOTE = "mnist-pipeline", "storage"
# moto accepts any pair; made per run so that no file of the repository contains them
KEY_ID, SECRET = f"AKIA{secrets.token_hex(8).upper()}", secrets.token_hex(20)  # no leading "-" for the CLI


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3(request, tmp_path_factory) -> str:
    """An S3 endpoint on 127.0.0.1 with an empty bucket; the server is stopped by its pid afterwards."""
    missing = [name for name in ("dvc_s3", "moto.server", "boto3") if importlib.util.find_spec(name) is None]
    if missing:
        unavailable(f"needs {', '.join(missing)}: pip install 'dvc-s3>=3.2' 'moto[server]'")
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )

    def stop() -> None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()

    request.addfinalizer(stop)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            assert server.poll() is None, f"moto_server exited with {server.returncode}"
            assert time.monotonic() < deadline, "moto_server did not answer within 30 s"
            time.sleep(0.2)
    import boto3

    boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
    ).create_bucket(Bucket=BUCKET)
    return endpoint


@pytest.fixture(scope="module")
def pushed(s3, tmp_path_factory) -> Path:
    """A checkout that ran the pipeline with DVC and pushed its outputs to the bucket."""
    mirror_dir()
    # a copy of the session's `dvc repro` (shared with test_pipeline_e2e.py)
    ws = copy_workspace(fast_dvc_run(tmp_path_factory), tmp_path_factory.mktemp("s3"), "origin")
    sh(ws, "dvc", "remote", "add", "-d", REMOTE, f"s3://{BUCKET}/dvc")
    sh(ws, "dvc", "remote", "modify", REMOTE, "endpointurl", s3)
    sh(ws, "dvc", "remote", "modify", REMOTE, "region", "us-east-1")
    sh(ws, "dvc", "remote", "modify", "--local", REMOTE, "access_key_id", KEY_ID)
    sh(ws, "dvc", "remote", "modify", "--local", REMOTE, "secret_access_key", SECRET)
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "pipeline run, S3 remote")
    sh(ws, "dvc", "push")
    return ws


@pytest.fixture(scope="module")
def pulled(pushed, tmp_path_factory) -> Path:
    """A fresh git clone of the pushed checkout, given the credentials file by hand, after `dvc pull`."""
    clone = tmp_path_factory.mktemp("clone") / "clone"
    sh(pushed.parent, "git", "clone", "-q", str(pushed), str(clone))
    assert not (clone / ".dvc/config.local").exists()
    shutil.copy2(pushed / ".dvc/config.local", clone / ".dvc/config.local")
    sh(clone, "dvc", "pull")
    return clone


def test_secrets_stay_out_of_the_committed_config(pushed):
    committed = (pushed / ".dvc/config").read_text()
    assert "endpointurl" in committed and f"s3://{BUCKET}/dvc" in committed
    assert SECRET not in committed and KEY_ID not in committed
    assert SECRET in (pushed / ".dvc/config.local").read_text()
    tracked = sh(pushed, "git", "ls-files")
    assert ".dvc/config.local" not in tracked.split()
    assert SECRET not in sh(pushed, "git", "log", "-p", "--all")


def test_pull_restores_every_artefact_byte_for_byte(pushed, pulled):
    mine, theirs = artefacts(pulled), artefacts(pushed)
    assert mine.keys() == theirs.keys()
    for required in (
        "data/raw/manifest.json",
        "data/processed/train_images.npy",
        "models/jit.safetensors",
        "metrics/evaluate/nojit.json",
        "plots/confusion/jit.csv",
        "reports/report.html",
    ):
        assert required in mine
    for rel, path in mine.items():
        assert path.read_bytes() == theirs[rel].read_bytes(), f"{rel} differs after dvc pull"


def test_pulled_clone_has_nothing_to_rerun(pulled):
    assert dvc_ran(sh(pulled, "dvc", "repro")) == set()
    assert snakemake_planned(pulled) == set(), "whatever times `dvc pull` gave the files"
