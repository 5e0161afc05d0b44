"""How a script splits into Spark streaming queries, answered from the graph alone (no pyspark here).

A Spark deployment runs one streaming query per output, each with its own checkpoint, named after
what it writes (the names are the checkpoint's sub-directories, so they must not change between
runs of a deployment):

- `sinks:stateless`: two or more requested sinks whose streams need no state and no data store
  share one query, which reads each input once per micro-batch (deployer.spark.run.shared); those
  a next version of the script adds beside a started one share `sinks:stateless~2`, and so on
  (deployer.spark.run.stateless_groups);
- `patterns:<stream>+<stream>...`: the requested sinks of patterns over the same source streams
  share one query, named after the streams (deployer.spark.run.pattern_groups);
- `sink:<stream>`: every other requested sink;
- `table:<name>`: every Materialize;
- `dead-letters`: the rejected records and late events of the file, Redis and trigger sources that
  no query reads on one path, and the failures of the stateless operators that no query computes
  on one path (the shared query on any), in one query; otherwise the first query that reads such a
  source, or computes such an operator, writes them from its tasks (`_by_readers`;
  deployer.spark.streams.spool), and a checkpoint whose dead-letters query wrote them keeps it so
  (`kept`);
- `failed:<node>` (`failed:<node>-2` for a node's second failure point): the failures at an operator
  after a window, a join or a data store call, each in a query of its own, which re-runs that part;
  except the failures of a window's rows, a join's pairs or a data store call's results that a sink
  or a table writes, as they are or through Maps, and those Maps' own (`written_with`): the query
  writing the rows writes them, from the same micro-batch (one computation of the window, one store
  call; deployer.spark.run.failures); and except the failure points that one of the other queries
  computes (`_spooled`): the first such query's tasks write them (`Query.spooled`;
  deployer.spark.streams.spool). A checkpoint that has a `failed:<node>` query keeps it (`kept`).

`plan_queries` lists them; the deployment starts exactly these (deployer.spark.run.deployment checks that
its translation found the same failure points), and `cep explain --queries` and the golden tests
(tests/spark/golden/*.queries) print them. Failure points follow the translation: an operator has
one where an expression it evaluates can fail (operators.analysis.can_fail), an Aggregate one for
its input (keys, arguments) and one for its rows (an aggregate that can overflow, HAVING,
projections, and the events on which a BATCH window's START or STOP fails where its state evaluates
them), a ReadSQL one more for text parameters bound for PostgreSQL (a NUL is refused there) and one for the events whose read the database refuses for their data, whose rows have
another number of columns than ON SQL names, or whose result values do not fit their fields (any
SELECT may meet one of these: a cast in its text, a table that holds other values than described),
an UpdateSQL one for the statements the database refuses.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

from deployer.spark.run.driver_split import on_driver
from deployer.spark.run.failure_points import failure_points
from deployer.spark.run.pattern_groups import PREFIX, grouped, pattern_groups, split_chain
from deployer.spark.run.query import Query
from deployer.spark.run.stateless_groups import is_shared, stateless_groups
from operators import graph as g
from operators.analysis import ancestors, merged_sources
from stores.bindings import StoreBindings

DEAD_LETTERS = "dead-letters"
# In `plan_queries`' `kept`: the checkpoint's dead-letters query wrote the rejected records and
# failures of the sources and operators that two queries compute (deployer.spark.run.layout)
SINGLE_READERS = "dead-letters of what two queries compute"
BY_TASKS = " (by its tasks)"  # ends what a query writes of a failure point its tasks write
_DEAD_LETTERS_WRITE = ("rejected records and failures of stateless operators",)
_ON_DRIVER = " (split on the driver)"  # of one it splits on the driver (driver_split)


def store_kinds(stores: StoreBindings | None) -> dict[str, str]:
    """The bound kind (postgresql, sqlite, redis) of every data store of a binding."""
    return {} if stores is None else {name: url.kind for name, url in stores.urls.items()}


def shared_inputs(graph: g.Graph, streams: Iterable[str]) -> list[str]:
    """The source streams the shared sinks read, in script order."""
    wanted = {n.id for s in streams for n in ancestors(graph, graph.streams[s].node)}
    return [n.stream for n in graph.sources() if n.id in wanted]


def has_rejects(uri: str) -> bool:
    """Whether a source bound to `uri` rejects records (files and Redis streams parse text; the
    synthetic `generator:` source makes typed events)."""
    return not uri.startswith("generator:")


def sequenced_merges(graph: g.Graph, sources: Mapping[str, str]) -> list[tuple[str, ...]]:
    """The streams Spark sequences together (operators.analysis.merged_sources; deployer.spark.
    merge_sequencer), given the sources' URIs: a stream of the synthetic generator passes no
    Sequencer (its events are in order by construction), so it is left out."""
    out = []
    for merge in merged_sources(graph):
        kept = tuple(s for s in merge if has_rejects(bound_uri(sources, s)))
        if len(kept) > 1:
            out.append(kept)
    return out


def written_with(
    graph: g.Graph,
    sinks: Iterable[str],
    groups: Mapping[str, str] | None = None,
    together: Collection[str] = (),
    owners: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Node id -> the query that writes the failures of the node's results along with the rows it
    writes: the first sink (not in the shared query) or table, in plan order, whose rows come from
    the node through Maps only (`split_chain`): a window's rows, a join's pairs, a data store call's
    results (the failure point (False, False) of `failure_points`) and those Maps' own. The steps
    after that split are stateless, so each micro-batch of the rows before it splits in two
    (deployer.spark.translate.graph.Split) and the Maps run over the batch. `groups`: the sinks
    of the queries pattern sinks share (pattern_groups.grouped), written by those queries;
    `together`: the sinks of the stateless sinks' shared queries (`stateless_groups`); `owners`:
    who wrote them before (`chosen`)."""
    sinks = list(sinks)
    shares = groups or {}
    writers = [(shares.get(s, f"sink:{s}"), graph.streams[s]) for s in sinks if s not in together]
    writers += [(f"table:{n.table.name}", n.inputs[0]) for n in graph.nodes if isinstance(n, g.Materialize)]
    able: dict[str, list[str]] = {}
    for name, port in writers:
        found = split_chain(graph, port)
        if found is not None:
            for node in [found[0], *found[1]]:
                able.setdefault(node.id, []).append(name)
    return {node: chosen(names, (owners or {}).get(f"along {node}")) for node, names in able.items()}


def chosen(able: list[str], owner: str | None) -> str:
    """Which of the queries `able` to write a failure point's dead letters (in plan order): the one
    that wrote them before (`owner`, deployer.spark.run.dead_letter_owners) while it can, else the
    first. A query added later may come first in plan order, but it reads its inputs from the
    beginning: taking the failure point over, it would write its dead letters again."""
    return owner if owner in able else able[0]


def failed_query(node_id: str, k: int) -> str:
    """The name of the query of a node's `k`-th failure point with a query of its own (from 1)."""
    return f"failed:{node_id}" if k == 1 else f"failed:{node_id}-{k}"


def bound_uri(sources: Mapping[str, str], stream: str) -> str:
    """The URI bound to `stream` in `sources` (names match case-insensitively), "" when none is."""
    return next((u for s, u in sources.items() if s.lower() == stream.lower()), "")


def plan_queries(
    graph: g.Graph,
    sinks: Iterable[str],
    sources: Mapping[str, str],
    store_kinds: Mapping[str, str] | None = None,
    kept: Collection[str] = (),
    started: Mapping[str, Collection[str]] | None = None,
    owners: Mapping[str, str] | None = None,
) -> list[Query]:
    """The streaming queries a run of `graph` starts, in the order it starts them. `sinks`: the
    requested sink streams (the graph's own names); `sources`: stream -> URI; `store_kinds`: data
    store name -> bound kind (postgresql, sqlite, redis); `kept`: the `failed:<node>` queries that
    keep a query of their own all the same (a checkpoint of an earlier layout has them: resumed
    as they were), the dead-letters query of an earlier layout (`DEAD_LETTERS`, `SINGLE_READERS`:
    `_by_readers`), and `pattern_groups.APART`; `started`: the shared queries the checkpoint has
    started, and their sinks, and its `sink:<name>` queries (`stateless_groups`,
    `pattern_groups.pattern_groups`); `owners`: the queries that wrote each failure point's dead
    letters in the checkpoint's runs, which keep them (`chosen`)."""
    owners = owners or {}
    kinds = {k.lower(): v for k, v in (store_kinds or {}).items()}
    sinks = list(sinks)
    out: list[Query] = []
    for name, members in stateless_groups(graph, sinks, started):
        out.append(_query(graph, name, members, [graph.streams[s].node for s in members]))
    together = {s for q in out for s in q.writes}
    groups = pattern_groups(graph, sinks, kept, started)
    shares = grouped(groups)
    for s in (s for s in sinks if s not in together):
        if s not in shares:
            out.append(_query(graph, f"sink:{s}", (s,), [graph.streams[s].node]))
        elif (name := shares[s]) not in (q.name for q in out):
            members = dict(groups)[name]
            out.append(_query(graph, name, members, [graph.streams[m].node for m in members]))
    out += [
        _query(graph, f"table:{n.table.name}", (n.table.name,), [n.id])
        for n in graph.nodes
        if isinstance(n, g.Materialize)
    ]
    # Translated: what the outputs need, and every UpdateSQL (its statements are effects of their own).
    roots = [graph.streams[s].node for s in sinks]
    roots += [n.id for n in graph.nodes if isinstance(n, g.Materialize | g.UpdateSQL)]
    needed = {a.id for r in roots for a in ancestors(graph, r)}
    along = written_with(graph, sinks, shares, together, owners)
    own: list[tuple[str, Query]] = []  # (node id, the query of a failure point of its own)
    stateless_points: list[str] = []  # the nodes with a failure point of a stateless operator
    for node in (n for n in graph.nodes if n.id in needed):
        rejecting = isinstance(node, g.Source) and has_rejects(bound_uri(sources, node.stream))
        k = 0
        for on_input, stateless in failure_points(node, graph, kinds, rejecting):
            if stateless:
                stateless_points.append(node.id)
                continue
            k += 1
            if not on_input and node.id in along:
                i = next(i for i, q in enumerate(out) if q.name == along[node.id])
                out[i] = _along(out[i], node.id)
                continue
            upto = [p.node for p in node.inputs] if on_input else [node.id]
            own.append((node.id, _query(graph, failed_query(node.id, k), (f"failures of {node.id}",), upto)))
    out += _spooled(graph, out, own, kept, owners)
    shared_reads, left = _by_readers(graph, out, sources, stateless_points, kept, owners)
    if shared_reads:
        reads = tuple(s.stream for s in graph.sources() if s.stream in shared_reads)
        out.append(Query(DEAD_LETTERS, _DEAD_LETTERS_WRITE, reads, owns=tuple(left)))
    return out


def _along(query: Query, node: str) -> Query:
    """`query`, writing the failures of `node`'s results along with its rows too."""
    return replace(query, writes=(*query.writes, f"failures of {node}"), along=(*query.along, node))


def _spooled(
    graph: g.Graph,
    out: list[Query],
    own: list[tuple[str, Query]],
    kept: Collection[str],
    owners: Mapping[str, str],
) -> list[Query]:
    """The failure points with a query of their own (`own`) made written by the tasks of the first
    query of `out` that computes their node (deployer.spark.streams.spool): it gains the failure
    point in `spooled`, and the queries still needed are returned. The other queries that compute
    the node pass the same stage, and their tasks write nothing (spool.Spool); a query whose plan
    computes it on two paths writes each dead letter once (task_spool.file_name). One that no query of
    `out` computes (an UpdateSQL whose rows nobody reads), or that is in `kept`, keeps its query;
    `owners`: the query that wrote it before does while it can (`chosen`)."""
    spooled = set()
    inside = [_upstream(graph, w.ends) for w in out]  # what each query computes
    for node, q in own:
        able = [w.name for w, nodes in zip(out, inside, strict=True) if node in nodes]
        if q.name in kept or not able:
            continue
        spooled.add(q.name)
        label = q.name.removeprefix("failed:")
        i = next(i for i, w in enumerate(out) if w.name == chosen(able, owners.get(label)))
        written = f"failures of {label}{BY_TASKS}"
        out[i] = replace(out[i], writes=(*out[i].writes, written), spooled=(*out[i].spooled, label))
    return [q for _, q in own if q.name not in spooled]


def _by_readers(
    graph: g.Graph,
    out: list[Query],
    sources: Mapping[str, str],
    stateless: list[str],
    kept: Collection[str],
    owners: Mapping[str, str],
) -> tuple[set[str], list[str]]:
    """The source streams the dead-letters query reads, and the failure points it writes (`input-
    <stream>`, `stateless-<node>`); the others' rejected records and late
    events, and the stateless failure points, are written by one query of `out` that computes them
    (`out` gains them in `spooled`: `input-<stream>`, `late-<stream>`, `stateless-<node>`): the
    first in plan order that computes them on one path (`_paths`), by its tasks or, where the rows
    come to the driver, there (driver_split). The other queries that read the source, or the operator,
    pass the same stage, whose tasks see that they are not that query's and write nothing
    (spool.Spool). A stream that passes the Sequencer with others (`sequenced_merges`) is read by
    every query that reads one of them. The shared query's sinks may compute an operator twice in a
    micro-batch; its tasks then spool the same rows under the same file name (task_spool.file_name).
    `kept`: the checkpoint has the dead-letters query of an earlier layout (deployer.spark.run.
    layout): `DEAD_LETTERS`, which wrote them all, still does; `SINGLE_READERS`, which wrote those
    of the sources and operators two queries compute, still does. `owners`: the query that wrote a
    failure point's before keeps it while it can, the dead-letters query too (`chosen`)."""
    rejecting = [s for s in graph.sources() if has_rejects(bound_uri(sources, s.stream))]
    reads = {s.stream for s in rejecting}
    if DEAD_LETTERS in kept:
        for node in stateless:
            reads |= {a.stream for a in ancestors(graph, node) if isinstance(a, g.Source)}
        return reads, [f"input-{s.stream}" for s in rejecting] + [f"stateless-{n}" for n in stateless]
    left: list[str] = []
    alone = SINGLE_READERS in kept
    readers = _readers(graph, out, sources)
    ends = {q.name: q.ends for q in out}
    streams = {q.name: q.reads for q in out}
    labels: dict[str, list[str]] = {}
    for src in rejecting:
        who = [q.name for q in out if q.name in readers.get(src.stream, set())]
        # The stem of the shared query's sources is read once per micro-batch, whatever reads it
        # after; but only a query that reads the stream itself unpacks its late events, where a
        # query that reads another stream of its merge passes only its Sequencer (fuzzer seed 99102)
        fit = [
            q for q in who if (src.stream in streams[q] if _once(q) else _paths(graph, src.id, ends[q]) == 1)
        ]
        key = f"input-{src.stream}"
        if fit and not (alone and len(who) > 1) and owners.get(key) != DEAD_LETTERS:
            late = [f"late-{src.stream}"] if src.event_time is not None else []
            labels.setdefault(chosen(fit, owners.get(key)), []).extend([key, *late])
            reads.discard(src.stream)
        else:
            left.append(key)
    inside = {q.name: _upstream(graph, q.ends) for q in out}  # what each query computes
    for node in stateless:
        computing = [q.name for q in out if node in inside[q.name]]
        # The shared query's sinks may compute it twice in a micro-batch: the same failed rows make
        # the same spool file (task_spool.file_name). In the layout between, it dropped them.
        fit = [q for q in computing if (not alone if _once(q) else _paths(graph, node, ends[q]) == 1)]
        key = f"stateless-{node}"
        if fit and not (alone and len(computing) > 1) and owners.get(key) != DEAD_LETTERS:
            labels.setdefault(chosen(fit, owners.get(key)), []).append(key)
        else:
            reads |= {a.stream for a in ancestors(graph, node) if isinstance(a, g.Source)}
            left.append(key)
    _given(graph, out, labels)
    return reads, left


def _readers(graph: g.Graph, out: list[Query], sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Source stream -> the queries of `out` that read it: a stream that passes the Sequencer with
    others (`sequenced_merges`) is read by every query that reads one of them."""
    group = {s: m for m in sequenced_merges(graph, sources) for s in m}
    readers: dict[str, set[str]] = {}
    for q in out:
        for s in q.reads:
            for t in group.get(s, (s,)):
                readers.setdefault(t, set()).add(q.name)
    return readers


def _given(graph: g.Graph, out: list[Query], labels: Mapping[str, list[str]]) -> None:
    """The queries of `out` given the failure points `labels` says (query -> labels) to write."""
    for i, q in enumerate(out):
        if q.name in labels:
            mine = (*q.spooled, *labels[q.name])
            driver = on_driver(graph, q.name, q.writes, mine)
            written = tuple(_written(x, x in driver) for x in labels[q.name])
            out[i] = replace(q, writes=(*q.writes, *written), spooled=mine, on_driver=driver)


def _once(query: str) -> bool:
    """Whether `query` computes each of its sources once, whatever reads them after: the shared
    query's stem, the pattern sinks' shared input (deployer.spark.patterns.shared)."""
    return is_shared(query) or query.startswith(PREFIX)


def _paths(graph: g.Graph, start: str, ends: tuple[str, ...]) -> int:
    """How many times a query with `ends` computes node `start`: the paths from it to them. Spark
    may compute a frame once for each path (deployer.spark.run.starting `reuses_exchanges`), and
    tasks that write dead letters on two paths would write them twice (a stream merged with itself:
    its late events twice, found by tests/fuzz/test_found_a_stream_merged_with_itself.py)."""
    inside = _upstream(graph, ends)
    consumers: dict[str, list[str]] = {}
    for node in graph.nodes:
        if node.id in inside:
            for port in node.inputs:
                consumers.setdefault(port.node, []).append(node.id)
    counted: dict[str, int] = {}

    def count(n: str) -> int:
        if n not in counted:
            counted[n] = (n in ends) + sum(count(c) for c in consumers.get(n, []))
        return counted[n]

    return count(start)


def _written(label: str, on_driver: bool) -> str:
    """What a query writes of a failure point `label` its tasks write, or it splits `on_driver`."""
    what, _, name = label.partition("-")
    return f"{_LABELS[what]} {name}{_ON_DRIVER if on_driver else BY_TASKS}"


_LABELS = {"input": "rejected records of", "late": "late events of", "stateless": "stateless failures of"}


def _upstream(graph: g.Graph, ends: tuple[str, ...]) -> set[str]:
    return {a.id for e in ends for a in ancestors(graph, e)}


def _query(graph: g.Graph, name: str, writes: tuple[str, ...], ends: list[str]) -> Query:
    upstream = _upstream(graph, tuple(ends))
    nodes = [n for n in graph.nodes if n.id in upstream]
    return Query(
        name,
        writes,
        tuple(n.stream for n in nodes if isinstance(n, g.Source)),
        tuple(n.id for n in nodes if isinstance(n, g.Aggregate | g.Join | g.Pattern | g.OutputRate)),
        tuple(n.id for n in nodes if isinstance(n, g.ReadSQL | g.UpdateSQL)),
        ends=tuple(ends),
    )


def describe(graph: g.Graph, queries: list[Query]) -> str:
    """A stable text dump, one query per line (golden tests, `cep explain --queries`)."""
    return "".join(q.describe(graph) + "\n" for q in queries)
