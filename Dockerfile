# ecomm-support-env for Hugging Face Spaces (sdk: docker) and for openenv's from_docker_image.
#
#   docker build -t ecomm-support-env .
#   docker run -p 7860:7860 -v ecomm-data:/data ecomm-support-env            # Spaces-style
#   docker run -p 8000:8000 -e PORT=8000 ecomm-support-env                   # OpenEnv container port
#   GenericEnvClient.from_docker_image("ecomm-support-env", env_vars={"PORT": "8000"})
#   docker run -p 7860:7860 -e DATABASE_URL=postgresql+asyncpg://user:pw@db:5432/ecomm ecomm-support-env
#
# One process serves one port: uvicorn listens on $PORT (7860, what Spaces expects). openenv's
# LocalDockerProvider maps the host port to container port 8000 and passes env_vars through, so
# PORT=8000 makes the same image answer there. Both ports are EXPOSEd for documentation only.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, read from the project's own pyproject (runtime only, no test extras), so
# this layer is rebuilt only when they change.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The service runs from this source tree: Alembic's config and revisions and the HTML templates
# are read next to the code, so the project is installed in place (as `make run` does).
COPY alembic.ini openenv.yaml ./
COPY migrations ./migrations
COPY service ./service
RUN pip install --no-deps -e . \
    && useradd --create-home --uid 1000 user \
    && mkdir -p /data \
    && chown user:user /data

USER 1000

# SQLite file under /data (Spaces' persistent storage mounts there). /data may be a network
# file system, where WAL's shared-memory index does not work: use a rollback journal and fsync
# every commit (DELETE + FULL). Set DATABASE_URL to a postgresql+asyncpg:// URL to use
# PostgreSQL instead (then /data is unused).
ENV HOME=/home/user \
    PORT=7860 \
    DATABASE_URL=sqlite+aiosqlite:////data/ecomm_support.db \
    SQLITE_JOURNAL_MODE=DELETE \
    SQLITE_SYNCHRONOUS=FULL
EXPOSE 7860 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD python -c "import os, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PORT', '7860'), timeout=4); assert b'healthy' in r.read()" || exit 1

CMD ["python", "-m", "service.app"]
