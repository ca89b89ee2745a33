"""The profile stage: the stage and its device-memory snapshots (stage.py), the execution trace
(trace.py) and its per-op table (op_table.py, hlo.py), the snapshots' parsing and rendering
(pprof.py) and `mnist-pipeline viewer`, the trace in XProf on the loopback interface (viewer.py)."""
