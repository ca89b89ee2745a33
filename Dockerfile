# syntax=docker/dockerfile:1
# mnist-jax-pipeline: one image per accelerator. JAX_EXTRA picks the JAX build (cpu, or an extra
# of pyproject.toml: cuda12, cuda13, tpu); nothing else differs between the images.
#
#   docker build -t mnist-jax-pipeline:cpu .                                   # JAX_EXTRA=cpu
#   docker build --build-arg JAX_EXTRA=cuda12 -t mnist-jax-pipeline:cuda12 .   # CUDA/cuDNN from pip wheels
#   docker build --build-arg JAX_EXTRA=cuda13 -t mnist-jax-pipeline:cuda13 .   # the same for CUDA 13 drivers
#   docker build --build-arg JAX_EXTRA=tpu -t mnist-jax-pipeline:tpu .
#   docker run --rm -u "$(id -u):$(id -g)" -v "$PWD:/workspace" mnist-jax-pipeline:cpu  # snakemake --cores all
#   docker run --rm -u "$(id -u):$(id -g)" -v "$PWD:/workspace" --gpus all mnist-jax-pipeline:cuda12
#   docker run --rm -u "$(id -u):$(id -g)" -v "$PWD:/workspace" mnist-jax-pipeline:cpu dvc repro
# (-u: outputs in the mounted checkout belong to you; without it the image's uid 1000 writes them)
#
# The image holds no package-index configuration. Builds behind a private mirror pass the
# host's settings as optional BuildKit secrets, read only while a RUN step lasts:
#   --secret id=aptsources,src=<sources.list or deb822 .sources>  (apt sources)
#   --secret id=aptconf,src=<apt.conf snippet>                    (proxy, Check-Valid-Until...)
#   --secret id=pipconf,src=<pip.conf>                            (index-url, extra-index-url...)
#   --secret id=pipcert,src=<CA bundle>                           (when pip.conf says cert = /run/secrets/pipcert)
# Without them the public Debian and PyPI defaults are used.
# tests/container/run_podman.sh builds and runs the image with Podman.

# A Debian bookworm image with Python 3.11 on PATH as python3. Pinned by tag; pin it by digest
# with --build-arg BASE_IMAGE=python:3.11-slim-bookworm@sha256:<digest> (docs/environments.md).
# A local stand-in (tests/container/base-python.Containerfile) replaces it where no registry is
# reachable.
ARG BASE_IMAGE=python:3.11-slim-bookworm
# The numeric id of the image's non-root user (and of its group).
ARG APP_UID=1000

# ---------------------------------------------------------------------------------------------
# The base image and the one way this file installs Debian packages (docker/apt-install.sh).
FROM ${BASE_IMAGE} AS apt-base
COPY docker/apt-install.sh /usr/local/bin/apt-install

# pprof (github.com/google/pprof) from Debian's Go sources, built offline (GOPATH mode, no
# module downloads). Static (CGO_ENABLED=0), so it runs on any runtime base.
FROM apt-base AS pprof-builder
RUN --mount=type=secret,id=aptsources,target=/run/secrets/aptsources \
    --mount=type=secret,id=aptconf,target=/run/secrets/aptconf \
    apt-install golang-go golang-github-google-pprof-dev
RUN GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=/tmp/gocache GOFLAGS='' CGO_ENABLED=0 \
      go build -trimpath -o /out/pprof github.com/google/pprof \
    && /out/pprof -h >/dev/null 2>&1 \
    && rm -rf /tmp/gocache

# ---------------------------------------------------------------------------------------------
# The pipeline: Graphviz (pprof's graphs), git (DVC), a venv, the non-root user, the package.
FROM apt-base
RUN --mount=type=secret,id=aptsources,target=/run/secrets/aptsources \
    --mount=type=secret,id=aptconf,target=/run/secrets/aptconf \
    apt-install ca-certificates git graphviz

# DVC and Snakemake call git inside the bind-mounted checkout, which belongs to the host's
# user, not to the container's: without this git refuses it ("dubious ownership").
RUN git config --system --add safe.directory '*'

COPY --from=pprof-builder /out/pprof /usr/local/bin/pprof

# A venv on both bases (the official python image and Debian's python3), so nothing below
# depends on where the base keeps its interpreter.
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
# pip itself is upgraded so that the same resolver runs on both bases
# hadolint ignore=DL3013
RUN --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \
    --mount=type=secret,id=pipcert,target=/run/secrets/pipcert \
    set -eu; \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    python3 -m venv "$VIRTUAL_ENV"; \
    pip install --no-cache-dir --upgrade pip "setuptools>=77" wheel

# The pipeline shares the GPU between processes: Snakemake runs independent stages side by
# side and JAX's default preallocation of 75% of device memory per process makes the second
# one fail with OOM, although the MLP needs well under 1 GiB. Allocate on demand instead.
# (Timed stages hold the pipeline's exclusive lock, so this costs them nothing measurable.)
ENV XLA_PYTHON_CLIENT_PREALLOCATE=false

# The non-root user. Its home is world-writable (sticky) so that `--user "$(id -u):$(id -g)"`,
# which makes files in a bind-mounted checkout belong to the host's user, still finds a
# writable HOME for the Matplotlib, Snakemake and TFDS caches.
ARG APP_UID
RUN groupadd --gid "${APP_UID}" app \
    && useradd --uid "${APP_UID}" --gid "${APP_UID}" --create-home --home-dir /home/app --shell /bin/sh app \
    && chmod 1777 /home/app \
    && mkdir -p /workspace \
    && chown app:app /workspace
ENV HOME=/home/app

# Third-party requirements of the chosen JAX build, exactly as locked: uv.lock exported with
# hashes (requirements/runtime.txt for cpu, requirements/<extra>.txt for the others; see
# tools/update-lock.sh), installed by pip in hash-checking mode, so every file is the locked one
# whatever index serves it. Two layers: the runtime (JAX for the CPU and everything else), the same
# for every build, then what the chosen build adds to it (the CUDA plugin and NVIDIA's libraries,
# or libtpu; nothing for cpu), so that a second build reuses the first layer and writes only its own.
# They are rebuilt only when the lock's exports change, not on every source edit. Downloads stay
# in a build cache mount, not in the image.
COPY pyproject.toml docker/requirements.py /opt/mnist-jax-pipeline/
COPY requirements /opt/mnist-jax-pipeline/requirements
# hadolint ignore=DL3042
RUN --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \
    --mount=type=secret,id=pipcert,target=/run/secrets/pipcert \
    --mount=type=cache,target=/var/cache/pip,sharing=locked \
    set -eu; \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    python3 /opt/mnist-jax-pipeline/requirements.py cpu >/tmp/requirements.txt; \
    PIP_CACHE_DIR=/var/cache/pip pip install --require-hashes -r /tmp/requirements.txt; \
    rm /tmp/requirements.txt
ARG JAX_EXTRA=cpu
# hadolint ignore=DL3042
RUN --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \
    --mount=type=secret,id=pipcert,target=/run/secrets/pipcert \
    --mount=type=cache,target=/var/cache/pip,sharing=locked \
    set -eu; \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    python3 /opt/mnist-jax-pipeline/requirements.py "${JAX_EXTRA}" --added >/tmp/requirements.txt; \
    if [ -s /tmp/requirements.txt ]; then \
      PIP_CACHE_DIR=/var/cache/pip pip install --no-deps --require-hashes -r /tmp/requirements.txt; \
    fi; \
    rm /tmp/requirements.txt

# The package itself, without dependencies.
COPY README.md* /opt/mnist-jax-pipeline/
COPY src /opt/mnist-jax-pipeline/src
RUN export HOME=/tmp/build-home \
    && pip install --no-cache-dir --no-deps --no-build-isolation /opt/mnist-jax-pipeline \
    && pip check \
    && mnist-pipeline --help >/dev/null \
    && rm -rf /tmp/build-home
# The mounted checkout's code runs, the code DVC and Snakemake hash (the installed copy is the fallback).
ENV PYTHONPATH=/workspace/src
WORKDIR /workspace
ARG APP_UID
USER ${APP_UID}:${APP_UID}
CMD ["snakemake", "--cores", "all"]
