"""`mnist-pipeline viewer --variant NAME [--port N]`: the profile's trace in XProf, on 127.0.0.1 only.

The `xprof` command listens on every interface, its web server and a gRPC worker (0.0.0.0:50051)
alike, and has no host option. Here XProf's own web application (its profile plugin, as `xprof`
loads it) runs in a web server bound to 127.0.0.1, and without the gRPC worker, which only serves
distributed processing: the trace viewer, op profile and memory tools answer without it. XProf
writes caches beside the trace it opens, so it opens a copy in a temporary folder: the profile
stage's outputs stay as the stage wrote them (a file added there would make the job stale).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from ...foundation import paths
from ...foundation.errors import PipelineError

HOST = "127.0.0.1"


def serve(trace: Path, port: int) -> None:
    """Serve XProf for the trace folder `trace` (jax.profiler's log folder) on HOST:port until stopped."""
    try:
        from cheroot import wsgi
        from xprof import server
    except ImportError:
        raise PipelineError(
            "xprof is not installed; run the viewer with its extra: uv run --extra profile-viewer"
            " mnist-pipeline viewer ... (or pip install xprof)"
        ) from None
    with tempfile.TemporaryDirectory(prefix="mnist-pipeline-viewer-") as folder:
        logdir = Path(folder) / paths.TRACE_LOGDIR
        shutil.copytree(trace, logdir)
        context = server.TBContext(str(logdir), server.DataProvider(str(logdir)), server.TBContext.Flags(False))
        context.hide_capture_profile_button = True
        context.enable_tab_name_label = False
        context.src_prefix = None
        plugin = server.ProfilePluginLoader().load(context)
        web = wsgi.Server((HOST, port), server.make_wsgi_app(plugin))
        web.prepare()  # bound: the address can be printed, or the port in use named
        print(f"XProf at http://{HOST}:{web.bind_addr[1]}/ (the trace of {trace}; Ctrl-C stops it)", flush=True)
        try:
            web.serve()
        finally:
            web.stop()


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline viewer`."""
    trace = paths.PROFILE.at(args.variant) / paths.TRACE_LOGDIR
    if not trace.is_dir():
        raise PipelineError(
            f"{trace}: no trace; run the profile stage first: snakemake --cores all (or dvc repro"
            f" profile@{args.variant})"
        )
    try:
        port = int(args.port)
    except ValueError:
        raise PipelineError(f"--port {args.port}: not a port number; give one from 1024 to 65535") from None
    try:
        serve(trace, port)
    except OSError as err:
        if err.errno is not None and err.errno in (98, 13):  # in use, or a port only root may bind
            raise PipelineError(f"--port {port}: cannot listen there ({err.strerror}); choose another port") from None
        raise
    sys.stdout.flush()
