# syntax=docker/dockerfile:1
# Two stages: the wheel is built where the build tools are, and the runtime
# image gets only the wheel and its server dependencies — no compiler, no
# dev dependencies, no source tree, no embedded PostgreSQL (compose runs a
# real one; the image needs DATABASE_URL).

FROM python:3.12.8-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md LICENSE ./
COPY store ./store
COPY hosting ./hosting
COPY convo ./convo
COPY api ./api
COPY migrations ./migrations
# The wheel, and every wheel the `server` extra needs, pinned by constraints.txt.
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt ".[server]"

FROM python:3.12.8-slim-bookworm AS runtime
COPY --from=build /wheels /wheels
COPY constraints.txt /tmp/constraints.txt
# Installed as root (into the image's Python) from the built wheels only;
# run as an unprivileged user with a fixed uid, so Kubernetes' runAsNonRoot
# can check it.
RUN pip install --no-cache-dir --no-index --find-links /wheels -c /tmp/constraints.txt "convo-store[server]" \
 && rm -rf /wheels /tmp/constraints.txt \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/convo \
        --shell /usr/sbin/nologin convo
ENV PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8000
# Liveness: the process answers (GET /ready also asks the database).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2); sys.exit(r.status != 200)"]
# SIGTERM (docker stop) drains requests in flight for CONVO_SHUTDOWN_TIMEOUT_S.
STOPSIGNAL SIGTERM
# `convo serve` waits for the database (CONVO_DB_WAIT_S), migrates, then serves.
CMD ["convo", "serve", "--host", "0.0.0.0", "--port", "8000"]
