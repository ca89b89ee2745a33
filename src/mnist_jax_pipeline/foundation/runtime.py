"""What a timing ran on and under which conditions: the device and versions, and the machine's timing lock (one
per machine and user, so checkouts, DVC's queued experiments and containers sharing /tmp time one at a time;
a stage waits for it MNIST_PIPELINE_LOCK_TIMEOUT seconds at most, then runs without it and says so)."""

import contextlib
import hashlib
import logging
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import psutil

from . import package_version
from .backend import numerics
from .errors import PipelineError, clip
from .paths import RUNTIME_LOCK

LOCK_ENV = "MNIST_PIPELINE_LOCK"  # the lock file, or `off`: jobs share the machine on purpose
DEFAULT_LOCK = Path(tempfile.gettempdir()) / f"mnist-jax-pipeline-{os.getuid()}.lock"
LOCK_TIMEOUT_ENV = "MNIST_PIPELINE_LOCK_TIMEOUT"  # seconds a stage waits for the lock before running without it
DEFAULT_LOCK_TIMEOUT = 60.0
SAY_AFTER = 1.0  # seconds of waiting before the wait is said
BUSY_SHARE = 0.10  # other processes' share of the CPU above which a timing is flagged
log = logging.getLogger(__name__)


def runtime_lock_sha256() -> str | None:
    """SHA-256 of the runtime lock export, where the project's checkout is the current folder."""
    with contextlib.suppress(OSError):
        return hashlib.sha256(RUNTIME_LOCK.read_bytes()).hexdigest()
    return None


def cpu_model() -> str:
    """The host CPU as precisely as decides whether two runs give the same bits: its name, and on Linux its
    family, model and the wide vector units XLA's kernels use."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        # the first processor's block is enough
        block = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").split("\n\n")[0]
        pairs = (line.partition(":") for line in block.splitlines())
        fields = {key.strip(): value.strip() for key, _, value in pairs}
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


@dataclass
class Conditions:
    """What a timed block observed: whether it held the lock, the machine's load, other processes' CPU share."""

    timing_lock: str  # "held", "off" (MNIST_PIPELINE_LOCK=off) or "not held" (another job kept it)
    lock_wait_seconds: float
    loadavg_1m_at_start: float | None
    loadavg_1m_at_end: float | None = None
    other_cpu_share: float | None = None

    @property
    def busy(self) -> bool:
        return self.timing_lock != "held" or (self.other_cpu_share or 0.0) > BUSY_SHARE

    def fields(self) -> dict[str, Any]:
        return {**self.__dict__, "busy": self.busy}


def _cpu_seconds() -> tuple[float, float, float]:
    """The clock, the machine's busy CPU seconds (all cores) and this process's own (its children's included)."""
    total, own = psutil.cpu_times(), psutil.Process().cpu_times()
    busy = sum(total) - total.idle - getattr(total, "iowait", 0.0)
    return time.monotonic(), busy, own.user + own.system + own.children_user + own.children_system


def _other_cpu_share(start: tuple[float, float, float]) -> float | None:
    """Other processes' share of the machine's CPU time since `start` (None: too short a time to tell)."""
    (t0, busy0, own0), (t1, busy1, own1) = start, _cpu_seconds()
    capacity = (t1 - t0) * (os.cpu_count() or 1)
    return round(max(0.0, (busy1 - busy0) - (own1 - own0)) / capacity, 3) if capacity > 0.5 else None


def holder(lock: Path) -> str:
    """The process that holds `lock` open, by its pid and command (a waiter opens it only for a moment)."""
    target = os.path.realpath(lock)
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.pid != os.getpid() and any(f.path == target for f in process.open_files()):
                return f"pid {process.pid}, {' '.join(process.cmdline()[2:5])[:30]}"  # 2: past python and the script
    return "an unknown process"


def lock_timeout() -> float:
    """MNIST_PIPELINE_LOCK_TIMEOUT in seconds (default 60)."""
    setting = os.environ.get(LOCK_TIMEOUT_ENV, "")
    with contextlib.suppress(ValueError):
        if 0 <= (value := float(setting or DEFAULT_LOCK_TIMEOUT)) < float("inf"):
            return value
    raise PipelineError(f"{LOCK_TIMEOUT_ENV}={clip(setting, 40)}: not a number of seconds; set e.g. 60 or unset it")


@contextlib.contextmanager
def timing_lock(job: str) -> Iterator[Conditions]:
    """Hold the machine's timing lock while the block runs, and observe the machine meanwhile. A wait over a second
    is said in one line naming the holder; after MNIST_PIPELINE_LOCK_TIMEOUT seconds the block runs without it."""
    setting = os.environ.get(LOCK_ENV) or str(DEFAULT_LOCK)
    started, load = time.perf_counter(), round(os.getloadavg()[0], 2)
    lock: filelock.FileLock | None = None
    state, path = "off", Path(setting)
    if setting != "off":
        if path.exists() and not path.is_file():
            raise PipelineError(
                f"{LOCK_ENV}={clip(setting)}: not a regular file; point it at a lock file, or set it to off"
            )
        try:
            path.open("a").close()  # filelock retries a file it cannot open for ever: say so at once instead
        except OSError as err:
            raise PipelineError(
                f"{path}: cannot open the timing lock of '{job}' ({err.strerror}); set {LOCK_ENV} to a writable file"
            ) from err
        lock = filelock.FileLock(path, thread_local=False, preserve_lock_file=True)
        limit = lock_timeout()
        try:
            lock.acquire(timeout=min(SAY_AFTER, limit))
        except filelock.Timeout:
            log.info("waiting up to %g s for the timing lock (%s)", limit, holder(path))
            with contextlib.suppress(filelock.Timeout):
                lock.acquire(timeout=max(limit - SAY_AFTER, 0))
        state = "held" if lock.is_locked else "not held"
        if not lock.is_locked:
            log.warning("ran without the timing lock after %g s; its timings share the machine", limit)
    conditions = Conditions(state, round(time.perf_counter() - started, 3), load)
    cpu = _cpu_seconds()
    try:
        yield conditions
    finally:
        conditions.other_cpu_share = _other_cpu_share(cpu)
        conditions.loadavg_1m_at_end = round(os.getloadavg()[0], 2)
        if lock is not None and lock.is_locked:
            lock.release()
