"""What a measurement ran on (device, versions, host) and the lock that makes timed stages run alone."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import filelock

from .errors import PipelineError

LOCK_ENV = "MNIST_PIPELINE_LOCK"  # a lock file's path, or `off` (jobs share the machine: ran_alone is false)
# One lock per machine and user: checkouts, DVC's queued experiments (each in a folder of its
# own) and containers sharing /tmp all time their heavy stages alone.
DEFAULT_LOCK = Path(tempfile.gettempdir()) / f"mnist-jax-pipeline-{os.getuid()}.lock"
LOCK_TIMEOUT_ENV = "MNIST_PIPELINE_LOCK_TIMEOUT"  # seconds a stage waits for the lock before it gives up
DEFAULT_LOCK_TIMEOUT = 3600.0
SAY_AFTER = 1.0  # seconds of waiting before the wait is explained
log = logging.getLogger(__name__)


# The runtime's locked versions, exported from uv.lock without the dev tools: every stage depends on it,
# so a new pinned version of a runtime package makes them stale under both tools, a new dev tool does not.
RUNTIME_LOCK = Path("requirements/runtime.txt")


def runtime_lock_sha256() -> str | None:
    """SHA-256 of the runtime lock export, where the project's checkout is the current folder."""
    import hashlib

    try:
        return hashlib.sha256(RUNTIME_LOCK.read_bytes()).hexdigest()
    except OSError:
        return None


# Numerics every backend keeps run after run. On a GPU, XLA's autotuning may pick another GEMM kernel in
# each process and scatters may use atomics, so two runs could give other bits: this flag makes XLA use
# deterministic kernels only (and skip autotuning). Float32 matrix products run at full float32 precision:
# not TF32 on an NVIDIA GPU, not bfloat16 passes on a TPU, the CPU's own precision (where it changes nothing).
DETERMINISTIC_XLA_FLAGS = ("--xla_gpu_exclude_nondeterministic_ops=true",)
MATMUL_PRECISION = "highest"


def set_numerics() -> None:
    """Set the deterministic XLA flags (kept where XLA_FLAGS already names them) and full-precision float32
    matmuls, before JAX starts a backend (through the environment, so JAX need not be imported yet)."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    named = {flag.split("=", 1)[0] for flag in flags}
    flags += [flag for flag in DETERMINISTIC_XLA_FLAGS if flag.split("=", 1)[0] not in named]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = MATMUL_PRECISION
    jax = sys.modules.get("jax")
    if jax is not None:  # imported already: it has read its environment
        jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION)


def numerics() -> dict[str, str]:
    """The XLA flags and matmul precision in force in this process."""
    import jax

    return {
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision", None) or "default"),
    }


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The host CPU, as precisely as decides whether two runs give the same bits: its model name, and on
    Linux its family and model numbers and the wide vector units XLA's kernels use (virtual machines often
    name only "AMD EPYC", which spans generations with and without AVX-512); else the machine type."""
    try:
        fields: dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if not key.strip():
                break  # the first processor's block is enough
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        fields = {}
    if "model name" not in fields:
        return platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    units = [name for flag, name in (("avx512f", "AVX-512"), ("amx_tile", "AMX")) if flag in flags]
    detail = ", ".join([f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}", *units])
    return f"{fields['model name']} ({detail})"


def device_info() -> dict[str, Any]:
    """Backend, devices and versions of the JAX runtime in use."""
    import jax

    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "devices": [str(d) for d in devices],
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "jax_version": jax.__version__,
        "jaxlib_version": package_version("jaxlib"),
        "host_cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "python_version": platform.python_version(),
        "machine": platform.machine(),
        "runtime_lock_sha256": runtime_lock_sha256(),
        **numerics(),
    }


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if platform.system() == "Darwin" else peak * 1024)


def holder_file(lock: Path) -> Path:
    """The sidecar beside the lock that names its holder (pid, checkout, job) while it is held."""
    return lock.with_name(lock.name + ".holder")


def holder(lock: Path) -> str:
    """Who holds `lock`, as its sidecar says: 'pid N in FOLDER (JOB)', or why that is unknown."""
    try:
        found = json.loads(holder_file(lock).read_text(encoding="utf-8"))
        return f"pid {found['pid']} in {found['cwd']} ({found['job']})"
    except (OSError, ValueError, KeyError, TypeError):
        return f"an unknown process (no readable {holder_file(lock).name} beside it)"


def lock_timeout() -> float:
    """MNIST_PIPELINE_LOCK_TIMEOUT in seconds (default an hour)."""
    setting = os.environ.get(LOCK_TIMEOUT_ENV, "")
    try:
        value = float(setting) if setting else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise PipelineError(
            f"{LOCK_TIMEOUT_ENV}={setting[:40]}: not a number of seconds; set it to e.g. 600, or unset it for an hour"
        )
    return value


def _acquire(lock: filelock.FileLock, path: Path, name: str) -> None:
    """Take the lock; after SAY_AFTER seconds say whom it waits for, after the limit give up in one line."""
    limit = lock_timeout()
    try:
        lock.acquire(timeout=min(SAY_AFTER, limit))
        return
    except filelock.Timeout:
        pass
    skip = f"{LOCK_ENV}=off runs it without the lock (its timings then share the machine)"
    if limit > SAY_AFTER:
        log.info(
            "waiting for the machine's lock %s, held by %s; up to %s s (%s); %s",
            path,
            holder(path),
            f"{limit:g}",
            LOCK_TIMEOUT_ENV,
            skip,
        )
        try:
            lock.acquire(timeout=limit - SAY_AFTER)
            return
        except filelock.Timeout:
            pass
    raise PipelineError(
        f"{path}: '{name}' waited {limit:g} s ({LOCK_TIMEOUT_ENV}) for the machine's lock, held by"
        f" {holder(path)}; let that job finish, stop it, or set {skip}"
    )


@contextlib.contextmanager
def exclusive(name: str) -> Iterator[dict[str, Any]]:
    """Hold the pipeline's exclusive lock so no other heavy stage shares the machine.

    Both orchestrators may start jobs in parallel; every heavy stage takes this lock, so
    timed work always runs alone (unless MNIST_PIPELINE_LOCK=off, as sweeps run their points side
    by side). A wait over a second is said in one line naming the holder (its pid and checkout, from
    the sidecar the holder writes beside the lock); MNIST_PIPELINE_LOCK_TIMEOUT limits it. Yields a
    record of the wait, for the run's information.
    """
    setting = os.environ.get(LOCK_ENV) or str(DEFAULT_LOCK)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if setting == "off":
        yield {"ran_alone": False, "lock_wait_seconds": 0.0, "loadavg_1m_at_start": load}
        return
    path = Path(setting)
    started = time.perf_counter()
    # filelock's lock is fcntl.flock on Unix, as a container sharing /tmp sees it; the file stays, so a
    # process that opened it while another held it locks the same file
    lock = filelock.FileLock(path, thread_local=False, preserve_lock_file=True)
    try:
        path.open("a").close()  # filelock retries a file it cannot open for ever: say so at once instead
        _acquire(lock, path, name)
    except OSError as err:
        raise PipelineError(
            f"{path}: cannot open the lock file of '{name}' ({err.strerror}); make the folder"
            f" writable or set {LOCK_ENV} to a writable file"
        ) from err
    sidecar = holder_file(path)
    try:
        with contextlib.suppress(OSError):  # the holder's name is a courtesy to those who wait
            sidecar.write_text(json.dumps({"pid": os.getpid(), "cwd": os.getcwd(), "job": name}), encoding="utf-8")
        waited = time.perf_counter() - started
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        yield {"ran_alone": True, "lock_wait_seconds": round(waited, 3), "loadavg_1m_at_start": load}
    finally:
        with contextlib.suppress(OSError):  # before the release, so a next holder's sidecar is never removed
            sidecar.unlink(missing_ok=True)
        lock.release()
