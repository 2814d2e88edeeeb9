"""OpenEnv's entry-point package: ``server.app:main`` is the ``server`` script (see server/app.py)."""
