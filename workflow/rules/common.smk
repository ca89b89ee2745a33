# The parameters and the stage table as rules see them: declarations, and calls into
# src/mnist_jax_pipeline/orchestration/snakemake_rules.py, where the work is done and tested.
#
# Ctrl-C, from the start of the workflow on, stops the running jobs cleanly and starts no new one
# (orchestration/stopping.py): installed first, before the package's imports.
from mnist_jax_pipeline.orchestration import stopping

STOPPER = stopping.install()

from mnist_jax_pipeline.foundation import paths, variants
from mnist_jax_pipeline.orchestration import code_deps, snakemake_paths, stage_table
from mnist_jax_pipeline.orchestration.markers import MARKERS
from mnist_jax_pipeline.orchestration.snakemake_rules import POINT, Rules, logged

# Content, not file times, decides what is stale (orchestration/freshness.py, markers.py): each job's
# provenance record is compared with the files, params.yaml and code as they are now. A job that is
# not current gets a new marker (.snakemake/provenance/<job>), its one input that is not ancient();
# every other input is ancient(), so a file time alone never re-runs a job. The default profile
# (profiles/default) turns off Snakemake's own records as triggers for the same reason.
RULES = Rules(workflow, config)
RULES.prepare()

VARIANTS = RULES.variants
CACHE = RULES.cache
SWEEPS = RULES.sweeps
SWEEP_ERRORS = RULES.sweep_errors

stage_inputs = RULES.stage_inputs
stage_outputs = RULES.stage_outputs
stage_params = RULES.stage_params
stage_command = RULES.stage_command
all_targets = RULES.all_targets
point_inputs = RULES.point_inputs
point_command = RULES.point_command
sweeps_command = RULES.sweeps_command
sweep_files = RULES.sweep_files
