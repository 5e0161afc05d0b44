"""The CREATE statements: STREAMSCHEMA and TRIGGER (Source nodes), WINDOW, DATASTORE, SQLQUERY and TABLE, each
validated and recorded in the plan state for the statements that follow."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.describe import described
from cpl.errors import PlanError
from cpl.plan_state import PlanState, Stream
from cpl.plan_windows import duration_ms, plan_window
from cpl.type_rules import resolve_type
from operators import graph as g
from operators.datatypes import TIMESTAMP, Field, Schema
from operators.sqltext import analyze
from operators.triggers import TRIGGER_SCHEMA, TRIGGERED_TIME, Trigger, cron_error

STORE_TYPES = {"postgresql": "postgresql", "postgres": "postgresql", "sqlite": "sqlite", "redis": "redis"}
SQL_STORE_TYPES = ("postgresql", "sqlite")


def create_stream_schema(state: PlanState, stmt: ast.CreateStreamSchema) -> None:
    state.check_new_stream(stmt.name, stmt.name_pos)
    schema = _stream_schema(stmt)
    event_time, watermark = _event_time(stmt, schema)
    _source(state, stmt.name, stmt.pos.line, schema, event_time, watermark)


def _source(
    state: PlanState,
    name: str,
    line: int,
    schema: Schema,
    event_time: str | None,
    watermark: int | None,
    trigger: Trigger | None = None,
) -> None:
    """A Source node for a declared stream, known to the statements below."""
    node = g.Source(
        id=state.next_id(),
        line=line,
        stream=name,
        source_schema=schema,
        event_time=event_time,
        watermark_ms=watermark,
        trigger=trigger,
    )
    state.streams[name.lower()] = Stream(name, state.add(node), schema, event_time, line, True)


def create_trigger(state: PlanState, stmt: ast.CreateTrigger) -> None:
    """A trigger is a source stream of one field, `triggered_time`, its event time: its ticks come in
    order, so its watermark is 0 (operators.triggers)."""
    state.check_new_stream(stmt.name, stmt.name_pos)
    if stmt.every is not None:
        if stmt.every.amount == 0:
            raise PlanError(
                f"AT EVERY 0 {stmt.every.unit.upper()}: the period must be positive", stmt.every.pos
            )
        trigger = Trigger("every", every_ms=duration_ms(stmt.every))
    elif stmt.cron is not None:
        why = cron_error(stmt.cron)
        if why is not None:
            raise PlanError(f"AT '{stmt.cron}' is not a Quartz cron expression: {why}", stmt.at_pos)
        trigger = Trigger("cron", cron=" ".join(stmt.cron.split()))
    else:
        trigger = Trigger("start")
    _source(state, stmt.name, stmt.pos.line, TRIGGER_SCHEMA, TRIGGERED_TIME, 0, trigger)


def _stream_schema(stmt: ast.CreateStreamSchema) -> Schema:
    fields: list[Field] = []
    seen: dict[str, int] = {}
    for f in stmt.fields:
        if f.name.lower() in seen:
            raise PlanError(f"field '{f.name}' is declared twice in stream '{stmt.name}'", f.pos)
        seen[f.name.lower()] = 1
        fields.append(Field(f.name, resolve_type(f.type)))
    return Schema(tuple(fields))


def _event_time(stmt: ast.CreateStreamSchema, schema: Schema) -> tuple[str | None, int | None]:
    """The event-time field named by TIMESTAMP BY and the watermark delay, or (None, None)."""
    if stmt.timestamp_by is None:
        if stmt.watermark is not None:
            raise PlanError("WATERMARK needs TIMESTAMP BY", stmt.watermark.pos)
        return None, None
    fd = schema.get(stmt.timestamp_by)
    if fd is None:
        raise PlanError(
            f"TIMESTAMP BY names '{stmt.timestamp_by}', which is not a field of '{stmt.name}'",
            stmt.timestamp_pos,
        )
    if fd.type.kind != TIMESTAMP:
        raise PlanError(f"TIMESTAMP BY needs a timestamp field; '{fd.name}' is {fd.type}", stmt.timestamp_pos)
    # Without WATERMARK, events may not arrive out of order at all: a delay of zero.
    watermark = duration_ms(stmt.watermark, zero=True) if stmt.watermark else 0
    return fd.name, watermark


def create_window(state: PlanState, stmt: ast.CreateWindow) -> None:
    state.declare("window", stmt.name, stmt.pos)
    plan_window(stmt.spec, None)  # validate sizes now; BATCH conditions at each use
    state.windows[stmt.name.lower()] = (stmt.spec, stmt.pos.line)


def create_datastore(state: PlanState, stmt: ast.CreateDataStore) -> None:
    state.declare("data store", stmt.name, stmt.pos)
    kind = STORE_TYPES.get(stmt.type)
    if kind is None:
        raise PlanError(
            f"unknown data store type '{stmt.type}'; use postgresql, sqlite or redis", stmt.type_pos
        )
    state.stores[stmt.name.lower()] = g.DataStore(stmt.name, kind)


def _store(state: PlanState, name: str, pos: ast.Pos) -> g.DataStore:
    store = state.stores.get(name.lower())
    if store is None:
        raise PlanError(f"unknown data store '{name}'; declare it with CREATE DATASTORE {name} TYPE ...", pos)
    return store


def create_sqlquery(state: PlanState, stmt: ast.CreateSqlQuery) -> None:
    state.declare("SQL query", stmt.name, stmt.pos)
    store = _store(state, stmt.store, stmt.store_pos)
    if store.type not in SQL_STORE_TYPES:
        raise PlanError(
            f"data store '{store.name}' is {store.type}; SQL queries need postgresql or sqlite",
            stmt.store_pos,
        )
    info = analyze(stmt.text)
    if info.statements == 0:
        raise PlanError("the SQL text is empty", stmt.text_pos)
    if info.statements > 1:
        raise PlanError(
            "the SQL text holds more than one statement; a SQLQUERY runs exactly one", stmt.text_pos
        )
    if info.kind not in ("select", "insert", "update", "delete"):
        raise PlanError(
            f"a SQLQUERY runs SELECT, INSERT, UPDATE or DELETE, not {info.kind.upper() or 'this text'}",
            stmt.text_pos,
        )
    if stmt.cache_rows is not None and info.kind != "select":
        raise PlanError("CACHE is only for SELECT queries", stmt.pos)
    ttl = duration_ms(stmt.cache_ttl) if stmt.cache_ttl else None
    returns = None
    if stmt.returns:
        if info.kind != "select":
            raise PlanError("RETURNS is only for SELECT queries", stmt.pos)
        try:
            returns = Schema(tuple(Field(f.name, resolve_type(f.type)) for f in stmt.returns))
        except ValueError as err:
            raise PlanError(f"RETURNS: {err}", stmt.pos) from None
    query = g.SqlQuery(
        stmt.name, store.name, stmt.text, info.kind, len(info.params), returns, stmt.cache_rows, ttl
    )
    state.queries[stmt.name.lower()] = query  # known to the statements below, whatever its store says
    state.queries[stmt.name.lower()] = described(state, query, store, stmt.pos)


def create_table(state: PlanState, stmt: ast.CreateTable) -> None:
    state.declare("table", stmt.name, stmt.pos)
    store = _store(state, stmt.store, stmt.store_pos)
    cols: list[Field] = []
    keys = [c.name for c in stmt.columns if c.primary_key]
    if keys and stmt.primary_key:
        raise PlanError("declare the primary key once: on a column or in PRIMARY KEY (...)", stmt.pos)
    keys = keys or list(stmt.primary_key)
    for c in stmt.columns:
        cols.append(Field(c.name, resolve_type(c.type), nullable=not (c.not_null or c.primary_key)))
    try:
        schema = Schema(tuple(cols))
    except ValueError as err:
        raise PlanError(f"table '{stmt.name}': {err}", stmt.pos) from None
    for k in keys:
        if k not in schema:
            raise PlanError(f"primary key column '{k}' is not a column of '{stmt.name}'", stmt.pos)
    if store.type == "redis" and not keys:
        raise PlanError(
            f"table '{stmt.name}' is in redis, which keys rows by primary key: declare one", stmt.pos
        )
    ttl = None
    if stmt.ttl is not None:
        if store.type != "redis":
            raise PlanError("TTL is only supported for tables in a redis data store", stmt.ttl.pos)
        ttl = duration_ms(stmt.ttl)
    canonical = tuple(schema.get(k).name for k in keys)  # type: ignore[union-attr]
    state.tables[stmt.name.lower()] = g.Table(stmt.name, store.name, schema, canonical, ttl)
