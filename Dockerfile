# ecomm-support-env for Hugging Face Spaces (sdk: docker), openenv's from_docker_image and
# `openenv validate`'s Docker runtime checks.
#
#   docker build -t ecomm-support-env .
#   docker run -p 7860:7860 -v ecomm-data:/data ecomm-support-env            # Spaces-style
#   docker run -p 8000:8000 ecomm-support-env                                # OpenEnv's container port
#   GenericEnvClient.from_docker_image("ecomm-support-env")
#   docker run -p 7860:7860 -e DATABASE_URL=postgresql+asyncpg://user:pw@db:5432/ecomm ecomm-support-env
#
# One process listens on $PORT (7860, what Spaces expects) and on $EXTRA_PORTS (8000, the port
# openenv's Docker providers map), both EXPOSEd; `server` is the project's entry point
# (server/app.py, [project.scripts]).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so this layer is rebuilt only when the lock changes. uv.lock is the one
# source of versions: uv exports its runtime set (no test extras) plus the `build` group (the
# setuptools that builds the project below) with hashes and pip installs exactly that.
# `--prune openenv` drops the OpenEnv toolchain (declared for the validators and `uv run server`;
# the service never imports it) and everything only it pulls in (gradio, pandas, numpy, ...), which
# would triple the image. The uv version matches the test extras' pin.
COPY pyproject.toml uv.lock README.md ./
RUN pip install "uv==0.13.9" \
    && uv export --frozen --no-dev --group build --no-emit-project --prune openenv --output-file /tmp/requirements.txt \
    && pip install --no-deps --require-hashes -r /tmp/requirements.txt \
    && pip uninstall --yes uv \
    && rm /tmp/requirements.txt

# The service runs from this source tree: Alembic's config and revisions and the HTML templates
# are read next to the code, so the project is installed in place (as `make run` does), which
# also installs the `server` script. Built with the locked setuptools installed above: no build
# isolation, so nothing is fetched here.
COPY alembic.ini openenv.yaml ./
COPY migrations ./migrations
COPY service ./service
COPY server ./server
RUN pip install --no-deps --no-build-isolation -e . \
    && python -m compileall -q service server migrations \
    && useradd --create-home --uid 1000 user \
    && mkdir -p /data \
    && chown user:user /data

USER 1000

# SQLite file under /data (Spaces' persistent storage mounts there). /data may be a network
# file system, where WAL's shared-memory index does not work: use a rollback journal and fsync
# every commit (DELETE + FULL). Set DATABASE_URL to a postgresql+asyncpg:// URL to use
# PostgreSQL instead (then /data is unused). Where /data cannot be written (openenv validate runs
# the image read-only as another user), the database goes to SQLITE_FALLBACK_DIR, with a warning.
# On a Hugging Face Space (the platform sets SPACE_ID) every request comes through the Space's proxy,
# which appends the visitor's address to X-Forwarded-For: with TRUSTED_PROXY_HOPS unset, the entry point
# counts clients by that entry (SPACES_PROXY_HOPS hops). Elsewhere (from_docker_image, docker run) the
# TCP peer counts, as X-Forwarded-For could be written by anyone. GET /limits shows what is counted.
ENV HOME=/home/user \
    PORT=7860 \
    SPACES_PROXY_HOPS=1 \
    EXTRA_PORTS=8000 \
    DATABASE_URL=sqlite+aiosqlite:////data/ecomm_support.db \
    SQLITE_FALLBACK_DIR=/tmp \
    SQLITE_JOURNAL_MODE=DELETE \
    SQLITE_SYNCHRONOUS=FULL
EXPOSE 7860 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PORT', '7860'), timeout=4); assert b'healthy' in r.read()"]

CMD ["server"]
