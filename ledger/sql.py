"""Lean SQL for the run loop's writes.

The run loop writes a few rows per result. Building model instances and compiling querysets
(`create`, `bulk_create`, `update`) costs more than the writes themselves
(bench/run_overhead.py), so these helpers build each table's SQL once. Every value still goes
through its field's own preparation, so JSON, datetimes and foreign keys are stored exactly
as the ORM stores them, on SQLite and PostgreSQL alike. A plain JSON object or list and an
aware datetime go straight to the backend's adaptation, which is where their field's
preparation ends up (most of a run's values are one or the other).
"""

import dataclasses
import datetime
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models.constants import OnConflict
from django.utils import timezone

# Defaults made by these factories are the same value every time: prepared once per table.
_CONSTANT_FACTORIES = (dict, list)
# Rows per INSERT: Django's batch size keeps older SQLite builds within 999 parameters, and
# this cap keeps PostgreSQL with server-side binding within 65535.
MAX_ROWS_PER_INSERT = 1000


# What a column's preparation is, when a value's type makes it plain (see `_prepared`).
_TEXT, _JSON, _DATETIME, _OTHER = "text", "json", "datetime", "other"
# Where a column's value comes from when a row does not give it.
_STAMP, _DEFAULT, _CALL = "stamp", "default", "call"


def _kind(field) -> str:
    if type(field) in (models.CharField, models.TextField):
        return _TEXT
    if type(field) is models.JSONField:
        return _JSON
    if type(field) is models.DateTimeField:
        return _DATETIME
    return _OTHER


@dataclass
class _Table:
    name: str
    fields: list
    # Per column: (name, attname, field, kind, missing, default) — `missing` says where its
    # value comes from when a row leaves it out: the write's instant (auto_now / auto_now_add), its default
    # prepared once, or its default made per row (a callable one).
    plan: list
    insert: str  # `INSERT INTO table (columns) VALUES `
    row: str  # `(%s, %s, ...)`: one row's placeholders
    # The conflict clause of each `update_conflicts` (an upsert) asked for, made once.
    upserts: dict = dataclasses.field(default_factory=dict)


_tables: dict[tuple, _Table] = {}


def _table(model, connection) -> _Table:
    key = (model, connection.vendor)
    table = _tables.get(key)
    if table is None:
        quote = connection.ops.quote_name
        fields = [field for field in model._meta.concrete_fields if not field.primary_key]
        plan = []
        for field in fields:
            default = None
            if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
                missing = _STAMP
            elif not callable(field.default) or field.default in _CONSTANT_FACTORIES:
                missing = _DEFAULT
                default = field.get_db_prep_save(field.get_default(), connection)
            else:
                missing = _CALL
            plan.append((field.name, field.attname, field, _kind(field), missing, default))
        name = quote(model._meta.db_table)
        columns = ", ".join(quote(field.column) for field in fields)
        table = _tables[key] = _Table(
            name=name, fields=fields, plan=plan,
            insert=f"INSERT INTO {name} ({columns}) VALUES ",
            row="(" + ", ".join(["%s"] * len(fields)) + ")")
    return table


def insert_rows(model, rows: list[dict], *, update_conflicts: tuple | None = None) -> None:
    """INSERT `rows` (field name → value; other fields take their defaults), as few statements
    as the database's parameter limit allows.

    `update_conflicts=(unique_fields, update_fields)` turns a row that collides on
    `unique_fields` into an update of `update_fields` (an upsert, as `bulk_create` does).
    """
    connection = connections[DEFAULT_DB_ALIAS]  # once: the module's proxy looks it up per use
    table = _table(model, connection)
    suffix = _conflict_suffix(model, table, connection, update_conflicts)
    # One row, the run loop's usual write, needs no batch size worked out.
    size = 1 if len(rows) == 1 else max(1, min(connection.ops.bulk_batch_size(table.fields, rows),
                                               MAX_ROWS_PER_INSERT))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            chunk = rows[start:start + size]
            cursor.execute(table.insert + ", ".join([table.row] * len(chunk)) + suffix,
                           _params(table, chunk, connection))


def _conflict_suffix(model, table: _Table, connection, update_conflicts: tuple | None) -> str:
    if not update_conflicts:
        return ""
    suffix = table.upserts.get(update_conflicts)
    if suffix is None:
        unique, update = update_conflicts
        suffix = table.upserts[update_conflicts] = " " + connection.ops.on_conflict_suffix_sql(
            table.fields, OnConflict.UPDATE,
            [model._meta.get_field(name).column for name in update],
            [model._meta.get_field(name).column for name in unique])
    return suffix


def _params(table: _Table, rows: list[dict], connection) -> list:
    now = None
    params = []
    for row in rows:
        for name, attname, field, kind, missing, default in table.plan:
            if name in row:
                value = row[name]
            elif attname in row:
                value = row[attname]
            elif missing is _STAMP:  # one instant for every stamped column, as a save does
                now = now or _prepared(field, kind, timezone.now(), connection)
                params.append(now)
                continue
            elif missing is _DEFAULT:
                params.append(default)
                continue
            else:
                value = field.get_default()
            params.append(_prepared(field, kind, value, connection))
    return params


def _prepared(field, kind: str, value, connection):
    """What `field`'s preparation makes of `value` for the database."""
    value_type = type(value)
    if value is None or (value_type is str and kind is _TEXT):
        return value
    if kind is _JSON and value_type in (dict, list):
        return connection.ops.adapt_json_value(value, field.encoder)
    if kind is _DATETIME and value_type is datetime.datetime and value.tzinfo is not None:
        return connection.ops.adapt_datetimefield_value(value)
    return field.get_db_prep_save(value, connection)


def add_to_row(model, key: dict, amounts: dict, latest: dict) -> int:
    """Add `amounts` to the columns of the row whose fields equal `key`, and set its `latest`
    values (field name → value each); the rows changed (0: no such row)."""
    connection = connections[DEFAULT_DB_ALIAS]
    cache_key = (model, connection.vendor, tuple(key), tuple(amounts), tuple(latest))
    statement = _additions.get(cache_key)
    if statement is None:
        quote, meta = connection.ops.quote_name, model._meta
        column = {name: quote(meta.get_field(name).column)
                  for name in (*key, *amounts, *latest)}
        statement = _additions[cache_key] = (
            f"UPDATE {_table(model, connection).name} SET "
            + ", ".join([f"{column[name]} = {column[name]} + %s" for name in amounts]
                        + [f"{column[name]} = %s" for name in latest])
            + " WHERE " + " AND ".join(f"{column[name]} = %s" for name in key))
    params = [_prepared(field, _kind(field), value, connection)
              for values in (amounts, latest, key) for name, value in values.items()
              for field in (model._meta.get_field(name),)]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


_additions: dict[tuple, str] = {}


def update_rows(model, values: dict, where: str, where_params: list) -> int:
    """UPDATE `values` (field name → value) of the rows matching `where`; the rows changed.

    `where` is SQL over the table's column names, with %s placeholders for `where_params`.
    """
    connection = connections[DEFAULT_DB_ALIAS]
    statement, params = _update(model, values, where, where_params, connection)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def update_returning(model, values: dict, where: str, where_params: list,
                     names: tuple[str, ...]) -> dict | None:
    """`update_rows`, reading back the first row it changed (`names`, as `first_row` reads
    them) in the same statement. None when no row changed, or when the database cannot
    return rows (SQLite before 3.35): the caller reads the row then."""
    connection = connections[DEFAULT_DB_ALIAS]
    if not connection.features.can_return_columns_from_insert:
        update_rows(model, values, where, where_params)
        return None
    columns, converters = _reader(model, names, connection)
    statement, params = _update(model, values, where, where_params, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"{statement} RETURNING {columns}", params)
        values = cursor.fetchone()
    return None if values is None else _converted(values, converters, connection)


def _update(model, values: dict, where: str, where_params: list, connection) -> tuple[str, list]:
    fields = [model._meta.get_field(name) for name in values]
    assignments = ", ".join(f"{connection.ops.quote_name(field.column)} = %s" for field in fields)
    params = [_prepared(field, _kind(field), values[field.name], connection) for field in fields]
    return (f"UPDATE {_table(model, connection).name} SET {assignments} WHERE {where}",
            params + list(where_params))


def first_row(model, names: tuple[str, ...], where: str, where_params: list) -> dict | None:
    """The first row matching `where` (SQL over column names) as field name → value, converted
    as the ORM converts it (JSON, datetimes), or None."""
    connection = connections[DEFAULT_DB_ALIAS]
    columns, converters = _reader(model, names, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM {_table(model, connection).name} WHERE {where}"
                       " LIMIT 1", list(where_params))
        values = cursor.fetchone()
    return None if values is None else _converted(values, converters, connection)


_readers: dict[tuple, tuple] = {}


def _reader(model, names: tuple[str, ...], connection) -> tuple[str, list]:
    """The column list of `names`, and each field's converters from database values."""
    key = (model, connection.vendor, names)
    reader = _readers.get(key)
    if reader is None:
        quote = connection.ops.quote_name
        fields = [model._meta.get_field(name) for name in names]
        reader = _readers[key] = (
            ", ".join(quote(field.column) for field in fields),
            [(field, connection.ops.get_db_converters(field.cached_col)
              + field.get_db_converters(connection)) for field in fields])
    return reader


def _converted(values, converters, connection) -> dict:
    row = {}
    for value, (field, field_converters) in zip(values, converters, strict=True):
        for convert in field_converters:
            value = convert(value, field.cached_col, connection)
        row[field.name] = value
    return row
