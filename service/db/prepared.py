"""Hot-path statements: compiled once per dialect, executed straight on the DB-API cursor.

A SQLAlchemy Core ``conn.execute(stmt, params)`` re-does per call what never changes for a fixed
statement — building the execution context, processing and ordering parameters, wrapping the
result — and on the step path that was most of the writer thread's time. :class:`Prepared` does
that work once per dialect: it keeps the SQL text SQLAlchemy compiled, the order of its positional
parameters, the constants bound in the statement, and the types' own bind processors (so JSON,
booleans and the UTC datetimes are stored exactly as the Core path stores them, and read back by
it). Then each call is one ``cursor.execute`` on the same connection, inside the same transaction.

Only positional paramstyles are supported: ``qmark`` (pysqlite) and ``numeric_dollar`` (asyncpg),
the two drivers of this service. Driver errors are re-raised as SQLAlchemy's exceptions
(``IntegrityError`` …), so callers handle them exactly as on the Core path. A SELECT's row
(:meth:`Prepared.first`) goes through its columns' result processors, as Core's would.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler


@dataclass(frozen=True)
class _Compiled:
    sql: str
    # one (name, constant, processor) per positional parameter, in order
    slots: tuple[tuple[str, Any, Callable[[Any], Any] | None], ...]
    dbapi_error: type[Exception]
    # a SELECT's columns: (name, result processor), in order
    columns: tuple[tuple[str, Callable[[Any], Any] | None], ...] = ()


_UNSET = object()


class Prepared:
    """One Core statement, compiled per dialect on first use; :meth:`execute` returns the rowcount,
    :meth:`first` a SELECT's first row."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        # per dialect object: its bind processors carry that engine's settings (JSON serializer)
        self._compiled: weakref.WeakKeyDictionary[Dialect, _Compiled] = weakref.WeakKeyDictionary()

    def _compile(self, dialect: Dialect) -> _Compiled:
        # a Core statement compiles with the SQL compiler, whose bind names and positions are read here
        compiled = cast(SQLCompiler, self.statement.compile(dialect=dialect))
        if compiled.positiontup is None:
            raise TypeError(f"{dialect.name} uses the {dialect.paramstyle} paramstyle; Prepared needs a positional one")
        by_name = {name: bind for bind, name in compiled.bind_names.items()}
        slots = []
        for name in compiled.positiontup:
            bind = by_name[name]
            constant = _UNSET if bind.required else bind.effective_value  # a literal of the statement
            slots.append((name, constant, bind.type.dialect_impl(dialect).bind_processor(dialect)))
        columns = tuple(
            (name, type_.dialect_impl(dialect).result_processor(dialect, None))
            for name, _, _, type_ in getattr(compiled, "_result_columns", ())
        )
        return _Compiled(compiled.string, tuple(slots), dialect.loaded_dbapi.Error, columns)

    def _prepared(self, dialect: Dialect, params: Mapping[str, Any]) -> tuple[_Compiled, list[Any]]:
        compiled = self._compiled.get(dialect)
        if compiled is None:
            compiled = self._compiled[dialect] = self._compile(dialect)
        values = []
        for name, constant, process in compiled.slots:
            value = params[name] if constant is _UNSET else constant
            values.append(process(value) if process is not None and value is not None else value)
        return compiled, values

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run with ``params`` (by bind name) on ``conn``'s DB-API connection; returns the rowcount."""
        compiled, values = self._prepared(conn.dialect, params)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(compiled.sql, values)
            return cursor.rowcount
        except compiled.dbapi_error as exc:
            raise sa_exc.DBAPIError.instance(compiled.sql, values, exc, compiled.dbapi_error) from exc
        finally:
            cursor.close()

    def first(self, conn: Connection, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """A SELECT's first row (None without one), by column name, its values as the Core path reads them
        (the types' own result processors: JSON decoded, datetimes parsed)."""
        compiled, values = self._prepared(conn.dialect, params)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(compiled.sql, values)
            row = cursor.fetchone()
        except compiled.dbapi_error as exc:
            raise sa_exc.DBAPIError.instance(compiled.sql, values, exc, compiled.dbapi_error) from exc
        finally:
            cursor.close()
        if row is None:
            return None
        return {
            name: process(value) if process is not None and value is not None else value
            for (name, process), value in zip(compiled.columns, row, strict=True)
        }


__all__ = ["Prepared"]
