# What the rules read: the pipeline's jobs, marked current or stale by content as the Snakefile is read
# (src/mnist_jax_pipeline/orchestration/snakefile.py), and the values the generated rules name.
import signal

from mnist_jax_pipeline.foundation import stops

stops.handle(stops.keep, (signal.SIGINT, signal.SIGHUP))  # a stop while the package imports is kept: Stopper() says it
from mnist_jax_pipeline.foundation.variants import names
from mnist_jax_pipeline.orchestration.snakefile import Pipeline, Stopper

STOPPER = Stopper()  # Ctrl-C or a closed terminal from here on stops the run cleanly
PIPELINE = Pipeline(workflow, config)

VARIANT_LIST = PIPELINE.variants
VARIANTS = "|".join(VARIANT_LIST)  # the variants params.yaml lists
ALL_VARIANTS = "|".join(names())  # any variant: a sweep chooses its own
CACHE = PIPELINE.cache
POINT_LOCK = PIPELINE.point_lock
cache_key = PIPELINE.cache_key
sweep_files = PIPELINE.sweep_files

REPORT = dict(caption="../report/report.rst", category="Report")  # Snakemake's own report (--report)
SUMMARY = dict(caption="../report/summary.rst", category="Report")
FIGURES = dict(caption="../report/figures.rst", category="Figures")
