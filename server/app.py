"""The container's entry point: the ``server`` script (``[project.scripts]``), the Docker ``CMD``.

OpenEnv's toolchain expects ``server/app.py`` with a ``main()`` (``openenv validate`` checks for
it; ``uv run server`` runs it). It builds nothing of its own: the app is
``service.app.create_app`` (the composition root) and it is served with the same collector tuning
and uvicorn options as ``python -m service.app``. What it adds is what a container needs:

- **two ports**: ``PORT`` (7860, Hugging Face Spaces) and ``EXTRA_PORTS`` (the image sets 8000,
  the container port of OpenEnv's ``from_docker_image`` and of ``openenv validate``'s Docker
  runtime checks), so one image answers both without per-platform configuration;
- **the Space's proxy**: on a Hugging Face Space (``SPACE_ID`` set by the platform) with
  ``TRUSTED_PROXY_HOPS`` unset, clients are counted by the X-Forwarded-For entry the Space's proxy writes
  (``SPACES_PROXY_HOPS``, 1 in the image): without it every visitor is the proxy's one address;
- **a writable database**: when the SQLite folder of ``DATABASE_URL`` cannot be written (OpenEnv's
  validator runs the image with a read-only root file system as an unprivileged user) and
  ``SQLITE_FALLBACK_DIR`` is set (the image sets ``/tmp``), the database goes there, with a
  warning that it will not outlive the container.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from service.settings import Settings

log = logging.getLogger("server.app")


def listen_ports(port: int, extra: str) -> list[int]:
    """``port`` first, then each port of the comma-separated ``extra`` not already listed."""
    ports = [port]
    for item in extra.replace(" ", "").split(","):
        if item and int(item) not in ports:
            ports.append(int(item))
    return ports


def writable_database_url(url: str, fallback_dir: str | None) -> str:
    """``url`` itself, unless it names a SQLite file whose folder cannot be written and a fallback
    folder is given: then the same file name inside ``fallback_dir``."""
    prefix, sep, path = url.partition(":///")
    if not fallback_dir or not sep or not prefix.startswith("sqlite") or not path or path.startswith(":memory:"):
        return url
    folder = Path(path.split("?", 1)[0]).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
        return url
    except OSError as exc:
        moved = Path(fallback_dir) / Path(path.split("?", 1)[0]).name
        log.warning(
            "database folder %s is not writable (%s): using %s instead — its data will not outlive this container",
            folder,
            exc.strerror or type(exc).__name__,
            moved,
        )
        return f"{prefix}:///{moved}" + (f"?{path.split('?', 1)[1]}" if "?" in path else "")


def proxy_hops(environ: Mapping[str, str]) -> int | None:
    """``TRUSTED_PROXY_HOPS`` for the container: as set; else, on a Hugging Face Space (the platform sets
    ``SPACE_ID`` in every Space's container), ``SPACES_PROXY_HOPS`` (the image sets 1: the Space's proxy,
    the only way in, appends the visitor's address to X-Forwarded-For); else None (the setting's default, 0)."""
    if (environ.get("TRUSTED_PROXY_HOPS") or "").strip():
        return None
    if environ.get("SPACE_ID") and (environ.get("SPACES_PROXY_HOPS") or "").strip():
        return int(environ["SPACES_PROXY_HOPS"])
    return None


def container_settings(environ: Mapping[str, str]) -> tuple[Settings, list[int]]:
    """The service's settings from the environment, with the container's database fallback and proxy hops,
    and the ports to listen on."""
    hops = proxy_hops(environ)
    if hops is not None:
        log.info(
            "on a Hugging Face Space (SPACE_ID=%s): counting clients by the X-Forwarded-For entry its proxy "
            "writes (TRUSTED_PROXY_HOPS=%d, from SPACES_PROXY_HOPS); GET /limits shows what the proxy forwards",
            environ.get("SPACE_ID"),
            hops,
        )
        environ = {**environ, "TRUSTED_PROXY_HOPS": str(hops)}
    settings = Settings.from_env(environ)
    settings = replace(
        settings, database_url=writable_database_url(settings.database_url, environ.get("SQLITE_FALLBACK_DIR"))
    )
    return settings, listen_ports(settings.port, environ.get("EXTRA_PORTS", ""))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO").upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    settings, ports = container_settings(os.environ)
    os.environ["DATABASE_URL"] = settings.database_url  # worker processes read their settings from here
    os.environ["TRUSTED_PROXY_HOPS"] = str(settings.trusted_proxy_hops)

    from service.app import create_app, raise_open_file_limit, serve, tune_gc, uvicorn_options
    from service.lib.connections import configure as configure_connections

    if len(ports) == 1 or settings.workers > 1:
        if len(ports) > 1:
            log.warning(
                "WORKERS=%d: serving PORT %d only (EXTRA_PORTS needs a single worker)", settings.workers, settings.port
            )
        serve("service.app:app_factory" if settings.workers > 1 else create_app(settings), settings)
        return
    # One process, one app, several listening sockets: what serve() does for one port.
    import uvicorn

    app = create_app(settings)
    tune_gc()
    raise_open_file_limit(settings)
    configure_connections(settings)
    config = uvicorn.Config(app, **uvicorn_options(settings))
    log.info("serving on %s ports %s", settings.host, ", ".join(map(str, ports)))
    uvicorn.Server(config).run(sockets=[_bind(settings.host, port) for port in ports])


if __name__ == "__main__":
    main()
