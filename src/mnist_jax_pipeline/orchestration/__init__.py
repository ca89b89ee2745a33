"""What runs the stages, and what proves their outputs current: the stage table (stage_table.py) and
the command table (commands.py), each stage's code deps (code_deps.py), the freshness checks and
provenance records (freshness.py), dvc.yaml's generation (generate.py), the Snakemake and DVC glue
(snakemake_paths.py, dvc_lock.py), `explain` and the run's RO-Crate (crate/)."""
