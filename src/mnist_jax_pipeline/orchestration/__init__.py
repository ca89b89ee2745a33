"""What runs the stages, and what proves their outputs current: the stage table (stage_table.py) and
the command table (commands.py), each stage's code deps (code_deps.py), the freshness checks and
provenance records (freshness.py), dvc.yaml's generation (generate.py), the Snakemake glue (what the
rule files call: snakemake_rules.py, snakemake_paths.py, markers.py, stopping.py) and DVC's
(dvc_lock.py), `explain` and the run's RO-Crate (crate/)."""
