"""The profile stage: the stage itself (stage.py: trace and device-memory snapshots of one variant),
the trace's per-op table (op_table/) and the pprof snapshots' parsing and rendering (pprof.py)."""
