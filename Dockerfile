# overlay-guard: the admission webhook (and overlay-lint) in a non-root image.
#   docker build -t overlay-guard:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY simulation/ simulation/
COPY lint/ lint/
COPY webhook/ webhook/
COPY certs/ certs/
# simulation/data/nodeoverlays.crd.yaml is a symlink into manifests/crd/; the wheel needs its target.
COPY manifests/crd/ manifests/crd/
# pip compiles the bytecode here: the root filesystem is read-only at run time.
RUN pip install --no-cache-dir --root-user-action=ignore --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532 is the conventional "nonroot" uid; numeric so runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 9443 8080
ENTRYPOINT ["overlay-webhook"]
