"""The data store behind the fuzzer's `ON SQL` calls and tables: the tables a case creates and fills
before each engine's run, and the queries its statements call.

A query is drawn for what the stream that calls it has: the queries with parameters bind integer
fields (`k`, `v` ...); a stream without any, a trigger's above all (one `triggered_time` field), calls
one without parameters (a periodic read of a table, a periodic update: what a trigger is for,
docs/language.md "Triggers") or one that binds a timestamp. No query reads a table that another
writes: the engines may differ there (docs/language.md, "Engines").
"""

from __future__ import annotations

from fuzz_case import StoreTable
from fuzz_exprs import INT, TS

STORE_TABLES = {
    "ref": StoreTable(
        "ref",
        "CREATE TABLE ref (k integer, a integer, name varchar(20), w double precision)",
        ("k", "a", "name", "w"),
        (
            (0, 10, "zero", 0.5),
            (1, 11, "one", 1.5),
            (1, 12, "uno", -2.0),
            (2, None, "two", None),
            (3, 13, None, 3.25),
        ),
    ),
    "log": StoreTable("log", "CREATE TABLE log (k bigint, v bigint)", ("k", "v")),
    "acc": StoreTable(
        "acc",
        "CREATE TABLE acc (k bigint PRIMARY KEY, total bigint)",
        ("k", "total"),
        ((0, 0), (1, 0), (2, 0), (3, 0)),
    ),
    # a NULL v is refused (a constraint): the UpdateSQL's failure path for the event's parameters
    "strict": StoreTable("strict", "CREATE TABLE strict (k bigint, v bigint NOT NULL)", ("k", "v")),
    "stamps": StoreTable("stamps", "CREATE TABLE stamps (at timestamp)", ("at",)),
}
# name -> (SQL, RETURNS, parameters, results, the store kinds it is drawn for)
READ_QUERIES = {
    "by_key": (
        "SELECT a, name FROM ref WHERE k = ? ORDER BY a",
        "RETURNS (a integer, name varchar)",
        1,
        2,
        None,
    ),
    "weights": ("SELECT w FROM ref WHERE k = ? ORDER BY w", "RETURNS (w double)", 1, 1, None),
    "count_over": ("SELECT count(*) FROM ref WHERE a >= ?", "RETURNS (c bigint)", 1, 1, None),
    # PostgreSQL refuses a division by zero (for the event's parameter: dead-lettered); SQLite
    # gives NULL and no error, so it is drawn for PostgreSQL only
    "by_ratio": ("SELECT a FROM ref WHERE k = 100 / ? ORDER BY a", "RETURNS (a integer)", 1, 1, "postgresql"),
    # without parameters: for a stream with no integer field to bind (a trigger's)
    "all_keys": ("SELECT k, a FROM ref ORDER BY k, a", "RETURNS (k integer, a integer)", 0, 2, None),
    "how_many": ("SELECT count(*) FROM ref WHERE a > 10", "RETURNS (c bigint)", 0, 1, None),
}
# name -> (SQL, the table it writes, the categories of its parameters)
WRITE_QUERIES = {
    "log_it": ("INSERT INTO log (k, v) VALUES (?, ?)", "log", (INT, INT)),
    "add_to": ("UPDATE acc SET total = total + ? WHERE k = ?", "acc", (INT, INT)),
    "strict_put": ("INSERT INTO strict (k, v) VALUES (?, ?)", "strict", (INT, INT)),
    # for a stream with no integer field: a periodic update, a timestamp written as it is bound
    "bump": ("UPDATE acc SET total = total + 1 WHERE k < 2", "acc", ()),
    "stamp": ("INSERT INTO stamps (at) VALUES (?)", "stamps", (TS,)),
}


def read_queries(store: str | None, with_ints: bool) -> list[str]:
    """The read queries a stream may call on `store`: those that bind an integer when it has one
    (`with_ints`), else those without parameters."""
    return sorted(
        q for q, spec in READ_QUERIES.items() if spec[4] in (None, store) and (spec[2] > 0) == with_ints
    )


def write_queries(with_ints: bool) -> list[str]:
    """The write queries a stream may call: those that bind integers when it has some, else those
    that bind none or a timestamp."""
    return sorted(q for q, spec in WRITE_QUERIES.items() if (INT in spec[2]) == with_ints)
