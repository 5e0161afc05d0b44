"""Statements → operator nodes (the paper's section 5 compiler).

Statements are planned in script order: a statement may read a stream declared with CREATE
STREAMSCHEMA or produced by an earlier statement, which is also what makes every graph acyclic.
Each INSERT becomes a short chain of nodes:

    inputs ─▶ [Union | Join | input] ─▶ Filter(WHERE on the event) ─▶ [ReadSQL | UpdateSQL]
           ─▶ Filter(WHERE on SQL results) ─▶ [Aggregate] ─▶ Map(SELECT) ─▶ [Materialize]

Nodes that would do nothing (an identity Map, an absent Filter) are not created.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpl import ast
from cpl.errors import Diagnostics
from cpl.typecheck import (
    AggregateChecker,
    Checker,
    Input,
    Scope,
    TypeCheckError,
    agg_name,
    contains_aggregate,
    place_window_bounds,
    resolve_type,
)
from operators import expr as ir
from operators import graph as g
from operators.sqltext import analyze
from operators.types import T_STRING, TIMESTAMP, Field, Schema, common_type

UNITS_MS = {
    "millisecond": 1,
    "milliseconds": 1,
    "ms": 1,
    "second": 1000,
    "seconds": 1000,
    "sec": 1000,
    "minute": 60_000,
    "minutes": 60_000,
    "min": 60_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "day": 86_400_000,
    "days": 86_400_000,
}
STORE_TYPES = {"postgresql": "postgresql", "postgres": "postgresql", "sqlite": "sqlite", "redis": "redis"}
SQL_STORE_TYPES = ("postgresql", "sqlite")


class PlanError(Exception):
    def __init__(self, message: str, pos: ast.Pos):
        super().__init__(message)
        self.message = message
        self.pos = pos


@dataclass
class Stream:
    name: str
    port: g.Port
    schema: Schema
    event_time: str | None
    line: int
    is_source: bool


@dataclass
class Planned:
    """What a statement has produced so far: the tip of its chain of nodes."""

    port: g.Port
    schema: Schema
    event_time: str | None


@dataclass
class Planner:
    diags: Diagnostics
    nodes: list[g.Node] = field(default_factory=list)
    streams: dict[str, Stream] = field(default_factory=dict)  # by lower-case name
    failed: set[str] = field(default_factory=set)  # streams whose statement had errors
    windows: dict[str, tuple[ast.WindowSpec, int]] = field(default_factory=dict)
    stores: dict[str, g.DataStore] = field(default_factory=dict)
    queries: dict[str, g.SqlQuery] = field(default_factory=dict)
    tables: dict[str, g.Table] = field(default_factory=dict)
    _decl_lines: dict[str, int] = field(default_factory=dict)

    # ---- helpers --------------------------------------------------------------------------------

    def add(self, node: g.Node) -> g.Port:
        self.nodes.append(node)
        return g.Port(node.id)

    def next_id(self) -> str:
        return f"n{len(self.nodes) + 1}"

    def duration_ms(self, d: ast.Duration) -> int:
        unit = UNITS_MS.get(d.unit)
        if unit is None:
            raise PlanError(
                f"unknown time unit '{d.unit}'; use MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS", d.pos
            )
        if d.amount <= 0:
            raise PlanError("a duration must be positive", d.pos)
        return d.amount * unit

    def _declared(self, kind: str, name: str, pos: ast.Pos) -> None:
        key = f"{kind}:{name.lower()}"
        if key in self._decl_lines:
            raise PlanError(f"{kind} '{name}' is already declared at line {self._decl_lines[key]}", pos)
        self._decl_lines[key] = pos.line

    # ---- declarations ---------------------------------------------------------------------------

    def statement(self, stmt: ast.Statement) -> None:
        try:
            if isinstance(stmt, ast.CreateStreamSchema):
                self.create_schema(stmt)
            elif isinstance(stmt, ast.CreateWindow):
                self._declared("window", stmt.name, stmt.pos)
                self.window(stmt.spec, None)  # validate sizes now; BATCH conditions at each use
                self.windows[stmt.name.lower()] = (stmt.spec, stmt.pos.line)
            elif isinstance(stmt, ast.CreateDataStore):
                self.create_datastore(stmt)
            elif isinstance(stmt, ast.CreateSqlQuery):
                self.create_sqlquery(stmt)
            elif isinstance(stmt, ast.CreateTable):
                self.create_table(stmt)
            else:
                self.insert(stmt)
        except (PlanError, TypeCheckError) as err:
            self.diags.error(err.message, err.pos)
            if isinstance(stmt, ast.Insert):
                self.failed.add(stmt.target.lower())
            if isinstance(stmt, ast.CreateStreamSchema):
                self.failed.add(stmt.name.lower())

    def create_schema(self, stmt: ast.CreateStreamSchema) -> None:
        self._check_new_stream(stmt.name, stmt.name_pos)
        fields: list[Field] = []
        seen: dict[str, int] = {}
        for f in stmt.fields:
            if f.name.lower() in seen:
                raise PlanError(f"field '{f.name}' is declared twice in stream '{stmt.name}'", f.pos)
            seen[f.name.lower()] = 1
            fields.append(Field(f.name, resolve_type(f.type)))
        schema = Schema(tuple(fields))
        event_time = None
        watermark = None
        if stmt.timestamp_by is not None:
            fd = schema.get(stmt.timestamp_by)
            if fd is None:
                raise PlanError(
                    f"TIMESTAMP BY names '{stmt.timestamp_by}', which is not a field of '{stmt.name}'",
                    stmt.timestamp_pos,
                )
            if fd.type.kind != TIMESTAMP:
                raise PlanError(
                    f"TIMESTAMP BY needs a timestamp field; '{fd.name}' is {fd.type}", stmt.timestamp_pos
                )
            event_time = fd.name
            # Without WATERMARK, events may not arrive out of order at all: a delay of zero.
            watermark = self.duration_ms(stmt.watermark) if stmt.watermark else 0
        elif stmt.watermark is not None:
            raise PlanError("WATERMARK needs TIMESTAMP BY", stmt.watermark.pos)
        node = g.Source(
            id=self.next_id(),
            line=stmt.pos.line,
            stream=stmt.name,
            source_schema=schema,
            event_time=event_time,
            watermark_ms=watermark,
        )
        port = self.add(node)
        self.streams[stmt.name.lower()] = Stream(stmt.name, port, schema, event_time, stmt.pos.line, True)

    def _check_new_stream(self, name: str, pos: ast.Pos) -> None:
        old = self.streams.get(name.lower())
        if old is not None:
            how = "declared" if old.is_source else "produced by the statement"
            raise PlanError(
                f"stream '{name}' is already {how} at line {old.line}; a stream has one producer "
                "(merge several with FROM a, b)",
                pos,
            )

    def create_datastore(self, stmt: ast.CreateDataStore) -> None:
        self._declared("data store", stmt.name, stmt.pos)
        kind = STORE_TYPES.get(stmt.type)
        if kind is None:
            raise PlanError(
                f"unknown data store type '{stmt.type}'; use postgresql, sqlite or redis", stmt.type_pos
            )
        self.stores[stmt.name.lower()] = g.DataStore(stmt.name, kind)

    def _store(self, name: str, pos: ast.Pos) -> g.DataStore:
        store = self.stores.get(name.lower())
        if store is None:
            raise PlanError(
                f"unknown data store '{name}'; declare it with CREATE DATASTORE {name} TYPE ...", pos
            )
        return store

    def create_sqlquery(self, stmt: ast.CreateSqlQuery) -> None:
        self._declared("SQL query", stmt.name, stmt.pos)
        store = self._store(stmt.store, stmt.store_pos)
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
        ttl = self.duration_ms(stmt.cache_ttl) if stmt.cache_ttl else None
        returns = None
        if stmt.returns:
            if info.kind != "select":
                raise PlanError("RETURNS is only for SELECT queries", stmt.pos)
            try:
                returns = Schema(tuple(Field(f.name, resolve_type(f.type)) for f in stmt.returns))
            except ValueError as err:
                raise PlanError(f"RETURNS: {err}", stmt.pos) from None
        self.queries[stmt.name.lower()] = g.SqlQuery(
            stmt.name, store.name, stmt.text, info.kind, len(info.params), returns, stmt.cache_rows, ttl
        )

    def create_table(self, stmt: ast.CreateTable) -> None:
        self._declared("table", stmt.name, stmt.pos)
        store = self._store(stmt.store, stmt.store_pos)
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
            ttl = self.duration_ms(stmt.ttl)
        canonical = tuple(schema.get(k).name for k in keys)  # type: ignore[union-attr]
        self.tables[stmt.name.lower()] = g.Table(stmt.name, store.name, schema, canonical, ttl)

    def window(self, spec: ast.WindowSpec, scope: Scope | None, name: str | None = None) -> g.Window:
        if spec.kind == "batch":
            assert spec.start is not None and spec.stop is not None
            if scope is None:
                return g.Window("batch", name=name)
            checker = Checker(scope)
            start = checker.check_bool(spec.start, "a BATCH START condition")
            stop = checker.check_bool(spec.stop, "a BATCH STOP condition")
            return g.Window("batch", start=start, stop=stop, name=name)
        if spec.kind == "tuple":
            assert isinstance(spec.size, int)
            size = spec.size
            advance = spec.advance if isinstance(spec.advance, int) else size
            if size <= 0 or advance <= 0:
                raise PlanError("a TUPLE window needs a positive SIZE and ADVANCE", spec.pos)
            return g.Window("tuple", size, advance, name=name)
        assert isinstance(spec.size, ast.Duration)
        size = self.duration_ms(spec.size)
        advance = self.duration_ms(spec.advance) if isinstance(spec.advance, ast.Duration) else size
        if advance > size:
            raise PlanError("a TIME window's ADVANCE cannot be larger than its SIZE", spec.pos)
        return g.Window("time", size, advance, name=name)

    # ---- statements -------------------------------------------------------------------------------

    def input_stream(self, item: ast.FromItem, target: str) -> Stream:
        s = self.streams.get(item.stream.lower())
        if s is not None:
            return s
        if item.stream.lower() in self.failed:
            raise _Skip()
        if item.stream.lower() == target.lower():
            raise PlanError(
                f"statement reads its own output '{target}': streams cannot form a cycle", item.pos
            )
        raise PlanError(
            f"unknown stream '{item.stream}'; declare it with CREATE STREAMSCHEMA or produce it in an earlier statement",
            item.pos,
        )

    def insert(self, stmt: ast.Insert) -> None:
        try:
            self._insert(stmt)
        except _Skip:
            self.failed.add(stmt.target.lower())

    def _insert(self, stmt: ast.Insert) -> None:
        sel = stmt.select
        table: g.Table | None = None
        if stmt.into_table:
            table = self.tables.get(stmt.target.lower())
            if table is None:
                raise PlanError(
                    f"unknown table '{stmt.target}'; declare it with CREATE TABLE ... IN store",
                    stmt.target_pos,
                )
        else:
            self._check_new_stream(stmt.target, stmt.target_pos)
            if stmt.target.lower() in self.tables:
                raise PlanError(
                    f"'{stmt.target}' is a table: write INSERT INTO TABLE {stmt.target}", stmt.target_pos
                )
        streams = [self.input_stream(i, stmt.target) for i in sel.sources]
        windowed = [i for i in sel.sources if i.window is not None]
        line = stmt.pos.line
        if len(windowed) == 2 and len(sel.sources) == 2:
            out = self.plan_join(sel, streams, line)
        elif len(windowed) == 1 and len(sel.sources) == 1:
            out = self.plan_aggregate(sel, streams[0], line)
        elif windowed:
            raise PlanError(
                "a statement reads one stream with a WINDOW (aggregate) or two streams with TIME windows (join)",
                windowed[0].window_pos,
            )
        else:
            out = self.plan_stateless(sel, streams, line)
        if table is not None:
            self.materialize(stmt, table, out)
        else:
            self.streams[stmt.target.lower()] = Stream(
                stmt.target, out.port, out.schema, out.event_time, line, False
            )

    def qualifiers(self, item: ast.FromItem) -> frozenset[str]:
        names = {item.stream.lower()}
        if item.alias:
            names.add(item.alias.lower())
        return frozenset(names)

    def plan_stateless(self, sel: ast.Select, streams: list[Stream], line: int) -> Planned:
        first = streams[0]
        if len(streams) > 1:
            for item, s in zip(sel.sources[1:], streams[1:], strict=True):
                if not first.schema.same_shape(s.schema):
                    raise PlanError(
                        f"Union needs identical schemas: '{first.name}' is {first.schema} but '{s.name}' is {s.schema}",
                        item.pos,
                    )
            same_time = {s.event_time.lower() if s.event_time else None for s in streams}
            event_time = first.event_time if len(same_time) == 1 else None
            port = self.add(
                g.Union(
                    id=self.next_id(),
                    line=line,
                    inputs=tuple(s.port for s in streams),
                    input_schema=first.schema,
                    event_time=event_time,
                )
            )
            cur = Planned(port, first.schema, event_time)
            quals: frozenset[str] = frozenset().union(*(self.qualifiers(i) for i in sel.sources))
        else:
            cur = Planned(first.port, first.schema, first.event_time)
            quals = self.qualifiers(sel.sources[0])
        scope = Scope([Input(cur.schema, quals)])
        cur, scope = self.where_and_sql(sel, cur, scope, line)
        if (
            sel.group_by
            or sel.having is not None
            or any(i.expr is not None and contains_aggregate(i.expr) for i in sel.items)
        ):
            pos = sel.group_by[0].pos if sel.group_by else sel.pos  # type: ignore[attr-defined]
            raise PlanError(
                "aggregates, GROUP BY and HAVING need a window: FROM stream WINDOW name (or WINDOW TUPLE SIZE n ...)",
                pos,
            )
        return self.project(sel, cur, scope, line)

    def where_and_sql(self, sel: ast.Select, cur: Planned, scope: Scope, line: int) -> tuple[Planned, Scope]:
        """WHERE before ON SQL for conjuncts about the event; after it for those that read its results."""
        pre: list[ast.Expr] = []
        post: list[ast.Expr] = []
        for c in _conjuncts(sel.where) if sel.where is not None else []:
            if sel.on_sql is None:
                pre.append(c)
                continue
            try:
                Checker(scope).check(c)
                pre.append(c)
            except TypeCheckError:
                post.append(c)
        cur = self.filter(pre, cur, scope, line)
        if sel.on_sql is not None:
            cur, scope = self.on_sql(sel.on_sql, cur, scope, line)
            cur = self.filter(post, cur, scope, line)
        return cur, scope

    def filter(self, parts: list[ast.Expr], cur: Planned, scope: Scope, line: int) -> Planned:
        if not parts:
            return cur
        checker = Checker(scope)
        preds = [checker.check_bool(p, "WHERE") for p in parts]
        pred = ir.conjoin(preds)
        assert pred is not None
        port = self.add(
            g.Filter(
                id=self.next_id(),
                line=line,
                inputs=(cur.port,),
                input_schema=cur.schema,
                predicate=pred,
                event_time=cur.event_time,
            )
        )
        return Planned(port, cur.schema, cur.event_time)

    def on_sql(self, on: ast.OnSql, cur: Planned, scope: Scope, line: int) -> tuple[Planned, Scope]:
        query = self.queries.get(on.query.lower())
        if query is None:
            raise PlanError(
                f"unknown SQL query '{on.query}'; declare it with CREATE SQLQUERY {on.query} ON store AS '...'",
                on.pos,
            )
        names = on.names
        if len(names) < query.param_count:
            raise PlanError(
                f"'{query.name}' has {query.param_count} parameter(s) (?) but ON SQL names {len(names)} input field(s)",
                on.pos,
            )
        checker = Checker(scope)
        try:
            args = tuple(checker.check(ast.Name(n, on.pos)) for n in names[: query.param_count])
        except TypeCheckError as err:
            raise PlanError(
                f"{err.message} ('{query.name}' has {query.param_count} parameter(s), so the first "
                f"{query.param_count} name(s) after the alias are input fields and the rest name its result)",
                on.pos,
            ) from None
        outs = names[query.param_count :]
        for o in outs:
            if len(o) != 1:
                raise PlanError(f"output name '{'.'.join(o)}' must be a plain name", on.pos)
        out_names = [o[0] for o in outs]
        for n in out_names:
            if n in cur.schema:
                raise PlanError(
                    f"ON SQL output '{n}' has the name of an input field; choose another name", on.pos
                )
        alias = on.alias
        if query.is_read:
            if not out_names:
                raise PlanError(
                    f"ON SQL with the SELECT '{query.name}' needs names for its result columns", on.pos
                )
            if query.returns is not None and len(query.returns) != len(out_names):
                raise PlanError(
                    f"'{query.name}' RETURNS {len(query.returns)} column(s) but ON SQL names {len(out_names)}",
                    on.pos,
                )
            # Without RETURNS the result columns are read as text (docs/language.md).
            types = (
                [f.type for f in query.returns] if query.returns is not None else [T_STRING] * len(out_names)
            )
            result = tuple(Field(n, t) for n, t in zip(out_names, types, strict=True))
            try:
                Schema(result)
            except ValueError as err:
                raise PlanError(f"ON SQL outputs: {err}", on.pos) from None
            node: g.Node = g.ReadSQL(
                id=self.next_id(),
                line=line,
                inputs=(cur.port,),
                input_schema=cur.schema,
                query=query,
                alias=alias,
                args=args,
                result_fields=result,
                outer=on.outer,
                event_time=cur.event_time,
            )
        else:
            if on.outer:
                raise PlanError("OUTER only applies to ON SQL with a SELECT", on.pos)
            if len(out_names) > 1:
                raise PlanError(
                    f"'{query.name}' is an {query.kind.upper()}: ON SQL names at most one output, its affected-row count",
                    on.pos,
                )
            node = g.UpdateSQL(
                id=self.next_id(),
                line=line,
                inputs=(cur.port,),
                input_schema=cur.schema,
                query=query,
                alias=alias,
                args=args,
                count_field=out_names[0] if out_names else None,
                event_time=cur.event_time,
            )
        port = self.add(node)
        extra = Schema(node.schema.fields[len(cur.schema) :])
        new_scope = Scope([*scope.inputs, Input(extra, frozenset({alias.lower()}), 0, len(cur.schema))])
        return Planned(port, node.schema, cur.event_time), new_scope

    def select_items(self, sel: ast.Select, checker: Checker, star: Schema | None) -> list[g.NamedExpr]:
        out: list[g.NamedExpr] = []
        for item in sel.items:
            if item.expr is None:
                if star is None:
                    raise PlanError("SELECT * is not allowed here; list the fields", item.pos)
                out.extend(g.NamedExpr(f.name, ir.Col(f.type, i, f.name)) for i, f in enumerate(star))
                continue
            value = checker.check(item.expr)
            name = item.alias
            if name is None:
                if isinstance(item.expr, ast.Name):
                    name = item.expr.parts[-1]
                else:
                    raise PlanError("this expression needs a name: add AS name", item.pos)
            out.append(g.NamedExpr(name, value))
        seen: set[str] = set()
        for ne, item in zip(out, _expanded(sel.items, star), strict=True):
            if ne.name.lower() in seen:
                raise PlanError(f"output field '{ne.name}' appears twice; rename one with AS", item.pos)
            seen.add(ne.name.lower())
        return out

    def project(self, sel: ast.Select, cur: Planned, scope: Scope, line: int) -> Planned:
        items = self.select_items(sel, Checker(scope), cur.schema)
        identity = len(items) == len(cur.schema) and all(
            isinstance(ne.expr, ir.Col) and ne.expr.index == i and ne.name == cur.schema.fields[i].name
            for i, ne in enumerate(items)
        )
        if identity:
            return cur
        event_time = _projected_time(items, cur.event_time)
        node = g.Map(
            id=self.next_id(),
            line=line,
            inputs=(cur.port,),
            input_schema=cur.schema,
            projections=tuple(items),
            event_time=event_time,
        )
        port = self.add(node)
        return Planned(port, node.schema, event_time)

    def resolve_window(self, item: ast.FromItem, scope: Scope) -> g.Window:
        if isinstance(item.window, str):
            found = self.windows.get(item.window.lower())
            if found is None:
                raise PlanError(
                    f"unknown window '{item.window}'; declare it with CREATE WINDOW", item.window_pos
                )
            return self.window(found[0], scope, item.window)
        assert isinstance(item.window, ast.WindowSpec)
        return self.window(item.window, scope)

    def plan_aggregate(self, sel: ast.Select, stream: Stream, line: int) -> Planned:
        item = sel.sources[0]
        cur = Planned(stream.port, stream.schema, stream.event_time)
        scope = Scope([Input(cur.schema, self.qualifiers(item))])
        window = self.resolve_window(item, scope)
        if window.kind == "time" and stream.event_time is None:
            raise PlanError(
                f"a TIME window needs event time: declare '{stream.name}' with TIMESTAMP BY <field>",
                item.window_pos,
            )
        cur, scope = self.where_and_sql(sel, cur, scope, line)
        if window.kind == "batch":  # its conditions read the events reaching the Aggregate
            window = self.resolve_window(item, scope)
        plain = Checker(scope)
        keys: list[ir.Expr] = []
        key_names: list[str] = []
        for k in sel.group_by:
            if contains_aggregate(k):
                raise PlanError("GROUP BY cannot hold aggregate functions", k.pos)  # type: ignore[attr-defined]
            value = plain.check(k)
            keys.append(value)
            base = k.parts[-1] if isinstance(k, ast.Name) else f"key{len(keys)}"
            key_names.append(
                base if base.lower() not in {n.lower() for n in key_names} else f"{base}_{len(keys)}"
            )
        checker = AggregateChecker(scope, keys, key_names, window.kind)
        items = self.select_items(sel, checker, None)
        having = checker.check_bool(sel.having, "HAVING") if sel.having is not None else None
        width = len(keys) + len(checker.aggs)
        items = [g.NamedExpr(i.name, place_window_bounds(i.expr, width)) for i in items]
        having = place_window_bounds(having, width) if having is not None else None
        if not checker.aggs:
            raise PlanError(
                "a statement that reads a stream WINDOW must compute aggregates (count, sum, avg, min, max)",
                item.window_pos,
            )
        node = g.Aggregate(
            id=self.next_id(),
            line=line,
            inputs=(cur.port,),
            input_schema=cur.schema,
            window=window,
            keys=tuple(g.NamedExpr(n, k) for n, k in zip(key_names, keys, strict=True)),
            aggs=tuple(g.NamedExpr(agg_name(i), a) for i, a in enumerate(checker.aggs)),
            having=having,
            projections=tuple(items),
        )
        port = self.add(node)
        return Planned(port, node.schema, None)

    def plan_join(self, sel: ast.Select, streams: list[Stream], line: int) -> Planned:
        left_item, right_item = sel.sources
        left, right = streams
        lq, rq = self.qualifiers(left_item), self.qualifiers(right_item)
        if lq & rq:
            raise PlanError(
                "both sides of the join have the same name; give one an alias: FROM s AS a ..., s AS b ...",
                right_item.pos,
            )
        scope = Scope([Input(left.schema, lq, 0), Input(right.schema, rq, 1)])
        windows = []
        for item, s in ((left_item, left), (right_item, right)):
            w = self.resolve_window(item, Scope([Input(s.schema, self.qualifiers(item))]))
            if w.kind != "time":
                raise PlanError(
                    f"a join needs TIME windows on both inputs, to be deterministic; '{s.name}' has a {w.kind.upper()} window",
                    item.window_pos,
                )
            if s.event_time is None:
                raise PlanError(
                    f"a join needs event time: declare '{s.name}' with TIMESTAMP BY <field>", item.pos
                )
            windows.append(w)
        if sel.on_sql is not None:
            raise PlanError(
                "ON SQL cannot be used in a join; enrich the joined stream in a following statement",
                sel.on_sql.pos,
            )
        if sel.group_by or sel.having is not None:
            raise PlanError("a join cannot GROUP BY; aggregate its output in a following statement", sel.pos)
        predicate: ir.Expr = ir.Lit(ir.T_BOOLEAN, True)
        checker = Checker(scope)
        if sel.where is not None:
            predicate = checker.check_bool(sel.where, "the join condition")
        star: list[g.NamedExpr] = []
        for side, s in enumerate((left, right)):
            star.extend(g.NamedExpr(f.name, ir.Col(f.type, i, f.name, side)) for i, f in enumerate(s.schema))
        items: list[g.NamedExpr] = []
        for sel_item in sel.items:
            if sel_item.expr is None:
                items.extend(star)
                continue
            items.extend(self.select_items(ast.Select((sel_item,), sel.sources), checker, None))
        seen: dict[str, int] = {}
        for ne in items:
            if ne.name.lower() in seen:
                raise PlanError(
                    f"output field '{ne.name}' appears twice (both inputs have it?); select one side with AS",
                    sel.items[0].pos,
                )
            seen[ne.name.lower()] = 1
        node = g.Join(
            id=self.next_id(),
            line=line,
            inputs=(left.port, right.port),
            left_schema=left.schema,
            right_schema=right.schema,
            left_window=windows[0],
            right_window=windows[1],
            left_time=left.event_time or "",
            right_time=right.event_time or "",
            predicate=predicate,
            projections=tuple(items),
        )
        event_time = None
        for ne in items:
            if isinstance(ne.expr, ir.Col) and ne.expr.side == 0 and ne.expr.name == left.event_time:
                event_time = ne.name
        node = _with_time(node, event_time)
        port = self.add(node)
        return Planned(port, node.schema, event_time)

    def materialize(self, stmt: ast.Insert, table: g.Table, out: Planned) -> None:
        for f in out.schema:
            col = table.columns.get(f.name)
            if col is None:
                raise PlanError(
                    f"table '{table.name}' has no column '{f.name}'; its columns: {', '.join(table.columns.names)}",
                    stmt.select.pos,
                )
            if common_type(col.type, f.type) is None:
                raise PlanError(
                    f"column '{table.name}.{col.name}' is {col.type}, but the statement gives {f.type}",
                    stmt.select.pos,
                )
        for col in table.columns:
            if col.name not in out.schema and not col.nullable:
                raise PlanError(
                    f"the statement gives no value for the required column '{table.name}.{col.name}'",
                    stmt.select.pos,
                )
        self.add(
            g.Materialize(
                id=self.next_id(),
                line=stmt.pos.line,
                inputs=(out.port,),
                input_schema=out.schema,
                table=table,
            )
        )


class _Skip(Exception):
    """A statement reads a stream whose own statement failed: its error was reported already."""


def _conjuncts(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.BinaryOp) and e.op == "and":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _expanded(items: tuple[ast.SelectItem, ...], star: Schema | None) -> list[ast.SelectItem]:
    out: list[ast.SelectItem] = []
    for i in items:
        out.extend([i] * (len(star) if i.expr is None and star is not None else 1))
    return out


def _projected_time(items: list[g.NamedExpr], event_time: str | None) -> str | None:
    if event_time is None:
        return None
    for ne in items:
        if isinstance(ne.expr, ir.Col) and ne.expr.name.lower() == event_time.lower():
            return ne.name
    return None


def _with_time(node: g.Join, event_time: str | None) -> g.Join:
    from dataclasses import replace

    return replace(node, event_time=event_time)
