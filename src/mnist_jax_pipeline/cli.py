"""One entry point, `mnist-pipeline`, with a subcommand per stage.

Errors the user can act on print one line (`error: ...`) and exit 1; `--verbose` adds
the traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence

from . import paths
from .config import load
from .errors import PipelineError


def _download(args: argparse.Namespace) -> None:
    from .data.download import download

    download(load(args.params), out_dir=args.out)


def _preprocess(args: argparse.Namespace) -> None:
    from .data.preprocess import preprocess

    preprocess(load(args.params).preprocess, raw_dir=args.raw, out_dir=args.out)


def _train(args: argparse.Namespace) -> None:
    from .train import train

    v = args.variant
    train(load(args.params), v, args.processed, paths.for_variant(paths.MODEL, v),
          paths.for_variant(paths.TRAIN_METRICS, v), paths.for_variant(paths.TRAIN_HISTORY, v))


def _evaluate(args: argparse.Namespace) -> None:
    from .evaluate import evaluate
    from .runtime import exclusive

    load(args.params)
    v = args.variant
    with exclusive(f"evaluate@{v}"):
        evaluate(v, paths.for_variant(paths.MODEL, v), args.processed, paths.for_variant(paths.EVAL_METRICS, v),
                 paths.for_variant(paths.CONFUSION, v), paths.for_variant(paths.EVAL_DETAILS, v))


def _profile(args: argparse.Namespace) -> None:
    from .profile import profile
    from .runtime import exclusive

    params = load(args.params)
    with exclusive("profile"):
        profile(params, args.processed, paths.for_variant(paths.MODEL, args.variant), args.out)


def _report(args: argparse.Namespace) -> None:
    from .report.render import render

    render(load(args.params), args.params)


def _check(args: argparse.Namespace) -> None:
    params = load(args.params)
    print(f"{args.params}: valid (sha256 {params.digest()[:12]})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mnist-pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="parameters file (default: params.yaml)")
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging and full tracebacks")
    sub = parser.add_subparsers(dest="stage", required=True, metavar="STAGE")

    p = sub.add_parser("check", help="validate the parameters file and exit")
    p.set_defaults(func=_check)
    p = sub.add_parser("download", help="download and prepare the dataset with TFDS (honours MNIST_MIRROR)")
    p.add_argument("--out", default=paths.RAW_DIR)
    p.set_defaults(func=_download)
    p = sub.add_parser("preprocess", help="write the versioned training arrays")
    p.add_argument("--raw", default=paths.RAW_DIR)
    p.add_argument("--out", default=paths.PROCESSED_DIR)
    p.set_defaults(func=_preprocess)
    for name, func, text in (("train", _train, "train one variant of the MLP"),
                             ("evaluate", _evaluate, "evaluate one trained variant")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--variant", required=True, choices=("nojit", "jit", "jit_scan"))
        p.add_argument("--processed", default=paths.PROCESSED_DIR)
        p.set_defaults(func=func)
    p = sub.add_parser("profile", help="device-memory snapshots (pprof) of the jit model's steps")
    p.add_argument("--variant", default="jit", choices=("nojit", "jit", "jit_scan"))
    p.add_argument("--processed", default=paths.PROCESSED_DIR)
    p.add_argument("--out", default=paths.PROFILE_DIR)
    p.set_defaults(func=_profile)
    p = sub.add_parser("report", help="render reports/report.html and reports/summary.md")
    p.set_defaults(func=_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("absl", "jax._src", "matplotlib", "PIL", "tensorflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        args.func(args)
    except PipelineError as err:
        if args.verbose:
            traceback.print_exc()
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; no output of this stage was written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
