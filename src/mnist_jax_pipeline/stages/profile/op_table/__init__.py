"""The per-op table of a `jax.profiler` trace: where a step's time goes, op by op.

`record` traces a few calls of a training loop, each inside a step annotation, and gives the
files fixed names. `parse` reads the Chrome-trace events (the Perfetto file) and builds the
`OpTable` of artefacts/profile_summary.py: every op's count, self time, share of the traced step
time and, for the matrix products, the achieved GFLOP/s (FLOPs counted from the compiled HLO).

What the trace holds (CPU, jax 0.10.2): an XLA op is a complete ('X') event whose `args` carry
`hlo_op`, `hlo_module` and `run_id` (one per executable run); it runs on a `tf_XLAEigen` or
`tf_XLAPjRtCpuClient` thread. Ops may overlap on different threads, and a thunk that hands its
work to a thread pool (a large `dot`, a partitioned loop fusion, a `while`) returns before the
work is done: its event ends early and its completion is marked later by an `end: <op>` event.
So an op's own time is its self time (event duration less the op events nested in it on its
thread), and its wall time runs to its completion. The traced step time is, per traced step,
the span from its first op's start to its last op's completion, summed over the steps: the
self-time sum falls short of it by the gaps between ops and the asynchronous tails.
Op-by-op code (`nojit`) runs every primitive as its own tiny executable, so its rows are the
executables (`hlo_module`), and a step's span includes the Python dispatch between them.

The steps, a module each: events.py records the trace and reads its events, hlo.py counts the
matrix products' FLOPs in the compiled HLO, timeline.py says when each op ran and finished,
table.py builds the table from them and writes it as text.
"""

from .events import STEP_ANNOTATION, Event, load_events, op_events, record, thread_names
from .hlo import Instruction, hlo_ops, instruction_flops, module_name, parse_hlo
from .table import CONTROL_FLOW, format_table, parse
from .timeline import SYNC_SLACK_US, TIMELINE_EVENTS, WAIT_FOR_COMPLETION, completion_times, self_times, union_length

__all__ = [
    "CONTROL_FLOW",
    "STEP_ANNOTATION",
    "SYNC_SLACK_US",
    "TIMELINE_EVENTS",
    "WAIT_FOR_COMPLETION",
    "Event",
    "Instruction",
    "completion_times",
    "format_table",
    "hlo_ops",
    "instruction_flops",
    "load_events",
    "module_name",
    "op_events",
    "parse",
    "parse_hlo",
    "record",
    "self_times",
    "thread_names",
    "union_length",
]
