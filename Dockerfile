# overlay-guard for people with a Docker engine: the image `make image` builds (hack/image.sh), made the
# Docker way. `make image` is the reference (no daemon, Debian packages and locked wheels only, run by the
# e2e suite); this file keeps its venv path, environment, user and entrypoint, and installs the same
# locked wheels. tests/e2e/test_image.py checks that USER and ENTRYPOINT here match the image's.
# Unlike the reference image, debian:bookworm-slim keeps its shell.
#   docker build -t overlay-guard:0.1.0 .
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY hack/image/requirements.lock hack/image/build-requirements.lock hack/image/
RUN python3 -m venv /opt/overlay-guard \
    && /opt/overlay-guard/bin/pip install --no-cache-dir --require-hashes --no-deps -r hack/image/requirements.lock
COPY pyproject.toml README.md ./
COPY simulation/ simulation/
COPY sources/ sources/
COPY lint/ lint/
COPY webhook/ webhook/
COPY certs/ certs/
# simulation/data/nodeoverlays.crd.yaml is a symlink into manifests/crd/; the wheel needs its target.
COPY manifests/crd/ manifests/crd/
# The wheel is built with the locked setuptools, as hack/image.sh builds it.
RUN python3 -m venv /build \
    && /build/bin/pip install --no-cache-dir --require-hashes -r hack/image/build-requirements.lock \
    && /build/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation -w /wheels . \
    && /opt/overlay-guard/bin/pip install --no-cache-dir --no-deps /wheels/*.whl \
    && /opt/overlay-guard/bin/pip check \
    && /opt/overlay-guard/bin/pip uninstall --yes pip

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/overlay-guard /opt/overlay-guard
ENV PATH=/opt/overlay-guard/bin:/usr/bin:/bin \
    HOME=/home/nonroot \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532 is the conventional "nonroot" uid; numeric so runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 9443 8080
ENTRYPOINT ["/opt/overlay-guard/bin/overlay-webhook"]
