FROM python:3.12-slim
WORKDIR /app
COPY pyproject.toml constraints.txt README.md alembic.ini ./
COPY store ./store
COPY api ./api
COPY migrations ./migrations
RUN pip install --no-cache-dir -c constraints.txt .
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
# `convo serve` migrates, then serves.
CMD ["convo", "serve", "--host", "0.0.0.0", "--port", "8000"]
