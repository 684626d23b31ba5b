# One image for workers, Flower and the one-shot coordinator.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORKDIR /app

# torch first, as a CPU build, so sentence-transformers does not pull a CUDA build of several GB.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
COPY pyproject.toml README.md ./
COPY memoria ./memoria
COPY adapters ./adapters
COPY workers ./workers
COPY coordinator ./coordinator
RUN pip install . && useradd --create-home memfarm && mkdir -p /cache /keys /data /app/results \
    && chown memfarm /cache /keys /app/results && chmod 700 /keys
USER memfarm
ENTRYPOINT ["memfarm"]
CMD ["--help"]
