"""Secrets seen where they must never travel (a URL's query string, which ends up in logs): whatever
they unlock is locked for good, at once. Only the SHA-256 of a secret is ever compared or stored.

- a **run token**: the run's token is replaced by one nothing hashes to — its episodes take no more steps
  and it hands out no more (it expires after RUN_TTL_S like any idle run; what it completed stays);
- a **submitter key**: revoked, as ``python -m service.submitters revoke`` does;
- an **episode token**: the episode named by the same request (an ``episode_id`` in its query or path)
  is locked the same way (episode tokens are compared per episode, so one not named cannot be found
  without reading every episode; such a token is refused and stays as it was).
"""

from __future__ import annotations

import secrets

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from service.db.engine import Database
from service.db.models import episodes, runs, submitters, utcnow


def _unusable() -> str:
    # 64 characters like a hash, but with a hyphen: no SHA-256 hex digest is ever equal to it
    return "revoked-" + secrets.token_hex(28)


async def revoke_leaked(db: Database, secret_sha256: str, episode_id: str | None = None) -> list[str]:
    """Lock whatever the secret with this hash unlocks; returns what that was (for the answer and the log)."""

    def revoke(conn: Connection) -> list[str]:
        done = []
        run_ids = list(conn.execute(select(runs.c.id).where(runs.c.token_sha256 == secret_sha256)).scalars())
        for run_id in run_ids:
            conn.execute(update(runs).where(runs.c.id == run_id).values(token_sha256=_unusable()))
            done.append(f"the token of run {run_id}")
        name = conn.execute(
            update(submitters)
            .where(submitters.c.key_sha256 == secret_sha256, submitters.c.revoked_at.is_(None))
            .values(revoked_at=utcnow())
            .returning(submitters.c.name)
        ).scalar()
        if name is not None:
            done.append(f"the submitter key of {name!r}")
        if episode_id:
            locked = conn.execute(
                update(episodes)
                .where(episodes.c.id == episode_id, episodes.c.token_sha256 == secret_sha256)
                .values(token_sha256=_unusable())
            ).rowcount
            if locked:
                done.append(f"the token of episode {episode_id!r}")
        return done

    return await db.write(revoke)
