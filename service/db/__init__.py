"""Persistence: SQLAlchemy models, engine setup (SQLite pragmas / PostgreSQL), migrations, repository."""
