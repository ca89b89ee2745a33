"""`mnist-pipeline viewer --variant NAME [--port N]`: the profile's trace in XProf, on 127.0.0.1 only.

The `xprof` command listens on every interface and has no host option, so XProf's own web application
runs here in a server bound to loopback, without its gRPC worker (distributed processing only), on a
copy of the trace: XProf writes caches beside what it opens, and the stage's outputs stay as they were."""

import argparse
import errno
import shutil
import socket
import tempfile
from pathlib import Path

from ...foundation import paths, stops
from ...foundation.errors import PipelineError

HOST = "127.0.0.1"


def checked_port(text: str) -> int:
    """The --port value, a number from 1 to 65535 that HOST can listen on; else one line saying why and what to do."""
    port = int(text) if text.isdigit() else 0
    if not 1 <= port <= 65535:
        raise PipelineError(f"--port {text}: not a port number; give one from 1 to 65535, such as 8791")
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the web server binds its socket
        try:
            probe.bind((HOST, port))
        except OSError as err:
            why = "is in use" if err.errno == errno.EADDRINUSE else f"cannot be listened on ({err.strerror})"
            raise PipelineError(f"--port {port}: {HOST}:{port} {why}; choose another port with --port N") from None
    return port


def serve(trace: Path, port: int) -> None:
    """Serve XProf for the trace folder `trace` (jax.profiler's log folder) on HOST:port until stopped."""
    try:
        from cheroot import wsgi
        from xprof import server
    except ImportError:
        extra = "uv run --extra profile-viewer mnist-pipeline viewer ... (or pip install xprof)"
        raise PipelineError(f"xprof is not installed; run the viewer with its extra: {extra}") from None
    with tempfile.TemporaryDirectory(prefix="mnist-pipeline-viewer-") as folder:
        logdir = Path(folder) / paths.TRACE_LOGDIR
        shutil.copytree(trace, logdir)
        context = server.TBContext(str(logdir), server.DataProvider(str(logdir)), server.TBContext.Flags(False))
        context.hide_capture_profile_button = True  # its other settings keep TBContext's defaults
        web = wsgi.Server((HOST, port), server.make_wsgi_app(server.ProfilePluginLoader().load(context)))
        web.prepare()
        print(f"XProf at http://{HOST}:{port}/ (the trace of {trace}; Ctrl-C stops it)", flush=True)
        try:
            web.serve()
        except stops.Stopped:  # Ctrl-C is how the viewer ends: no failure, nothing to say
            stops.RECEIVED.clear()
        finally:
            web.stop()


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline viewer`."""
    trace = paths.PROFILE.at(args.variant) / paths.TRACE_LOGDIR
    if not trace.is_dir():
        raise PipelineError(
            f"{trace}: no trace; run the profile stage first, with '{args.variant}' among params.yaml's variants:"
            f" snakemake --cores all (or dvc repro {paths.job_name('profile', args.variant)})"
        )
    serve(trace, checked_port(args.port))
