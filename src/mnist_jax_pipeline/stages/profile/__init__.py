"""The profile stage: the stage, its device-memory snapshots and its trace (stage.py), the trace's
files (trace_files.py) and per-op table (op_table.py, hlo.py), the snapshots' parsing and rendering
(pprof.py) and `mnist-pipeline viewer`, the trace in XProf on the loopback interface (viewer.py)."""
