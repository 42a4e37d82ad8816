FROM python:3.12-slim
WORKDIR /app
COPY pyproject.toml constraints.txt README.md LICENSE alembic.ini ./
COPY store ./store
COPY hosting ./hosting
COPY convo ./convo
COPY api ./api
COPY migrations ./migrations
# Installed as root (into the image's Python); run as an unprivileged user
# with a fixed uid, so Kubernetes' runAsNonRoot can check it.
RUN pip install --no-cache-dir -c constraints.txt ".[server,embedded]" \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/convo \
        --shell /usr/sbin/nologin convo \
 && mkdir -p /data && chown convo:convo /data
ENV PYTHONUNBUFFERED=1 \
    CONVO_DATA_DIR=/data
USER 10001:10001
EXPOSE 8000
# Liveness: the process answers (GET /ready also asks the database).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2); sys.exit(r.status != 200)"]
# SIGTERM (docker stop) drains requests in flight for CONVO_SHUTDOWN_TIMEOUT_S.
STOPSIGNAL SIGTERM
# `convo serve` waits for the database (CONVO_DB_WAIT_S), migrates, then serves.
CMD ["convo", "serve", "--host", "0.0.0.0", "--port", "8000"]
