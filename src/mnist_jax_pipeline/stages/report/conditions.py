"""Under what conditions the report measured: the parameters that matter, as values, and how busy the machine was
while each variant trained (metrics/train/<variant>.run.json), in words."""

from ...artefacts.training import RunInfo
from ...config.params import Params
from ...foundation.paths import job_name
from ...foundation.runtime import BUSY_SHARE, LOCK_ENV
from .formatting import percent, plain, seconds


def parameter_values(params: Params) -> list[str]:
    """The training parameters a reader needs to judge the numbers:
    ['10 epochs', 'sgd', 'step size 0.01', 'batch size 128', 'variants nojit, jit']."""
    train = params.train
    schedule = f", {train.schedule} schedule" if train.schedule != "constant" else ""
    return [
        f"{train.epochs} epoch{'s' if train.epochs != 1 else ''}",
        train.optimizer,
        f"step size {plain(train.step_size)}{schedule}",
        f"batch size {train.batch_size}",
        f"variant{'s' if len(params.variants) != 1 else ''} {', '.join(params.variants)}",
    ]


def _on_cores(count: int | None) -> str:
    return f" on {count} core{'s' if count != 1 else ''}" if count else ""


def _others_share(run: RunInfo) -> float | None:
    """The share of the CPU other processes used, where it made the machine busy."""
    return run.other_cpu_share if (run.other_cpu_share or 0.0) > BUSY_SHARE else None


def observed(variant: str, run: RunInfo) -> str:
    """What made the machine busy while train@<variant> was timed, in one clause:
    'other processes used 35 % of the CPU while train@jit ran (1-minute load 5.0 → 4.2 on 2 cores)'."""
    job, share = job_name("train", variant), _others_share(run)
    lock = "ran without the timing lock" if run.timing_lock != "held" else None
    if run.timing_lock == "not held":
        lock = f"{lock} after waiting {seconds(run.lock_wait_seconds)} for another job's"
    cpu = f"other processes used {percent(share, 0)} of the CPU" if share is not None else None
    text = f"{cpu} while {job} ran" if cpu else f"{job} {lock or 'recorded a busy machine'}"
    if lock and cpu:
        text = f"{job} {lock} while {cpu}"
    details = [f"{LOCK_ENV}=off"] if run.timing_lock == "off" else []
    if loads := [f"{value:.1f}" for value in (run.loadavg_1m_at_start, run.loadavg_1m_at_end) if value is not None]:
        details.append(f"1-minute load {' → '.join(loads)}{_on_cores(run.host_cpu_count)}")
    return f"{text} ({'; '.join(details)})" if details else text


def busy_flag(runs: dict[str, RunInfo]) -> str | None:
    """One sentence naming every variant whose run was busy and what was observed; None when none was."""
    clauses = [observed(variant, run) for variant, run in runs.items() if run.busy]
    return f"Timings measured on a busy machine: {'; '.join(clauses)}." if clauses else None


def calm_line(runs: dict[str, RunInfo]) -> str:
    """How quiet the machine was while every variant trained: 'timing lock held, 1-minute load 1.3–1.7 on 2 cores'."""
    parts = ["timing lock held"]
    if shares := [run.other_cpu_share for run in runs.values() if run.other_cpu_share is not None]:
        parts.append(f"other processes used at most {percent(max(shares), 0)} of the CPU")
    if loads := [v for run in runs.values() for v in (run.loadavg_1m_at_start, run.loadavg_1m_at_end) if v is not None]:
        low, high = f"{min(loads):.1f}", f"{max(loads):.1f}"
        cores = {run.host_cpu_count for run in runs.values()}
        on = _on_cores(cores.pop()) if len(cores) == 1 else ""
        parts.append(f"1-minute load {low if low == high else f'{low}–{high}'}{on}")
    return ", ".join(parts)


def short_causes(run: RunInfo) -> str | None:
    """A busy run's causes in a few words, for a table cell ('no timing lock', 'others 35 % CPU'); None if calm."""
    if not run.busy:
        return None
    causes = ["no timing lock"] if run.timing_lock != "held" else []
    if (share := _others_share(run)) is not None:
        causes.append(f"others {percent(share, 0)} CPU")
    return ", ".join(causes) or "busy"
