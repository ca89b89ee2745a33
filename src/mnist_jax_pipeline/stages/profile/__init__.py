"""The profile stage: the stage itself (stage.py: trace and device-memory snapshots of one variant),
the trace's per-op table (op_table/), the pprof snapshots' parsing and rendering (pprof.py) and
`mnist-pipeline viewer`, which serves a profile's trace on the loopback interface (viewer.py)."""
