"""Which layout of queries a checkpoint was written by: a run resumes an earlier layout's queries
as they were (their progress is their own), rather than move their work into other queries.

Ten changes of layout are kept so (docs/service.md, "Redeploying: when is the checkpoint kept?"): a failure point after a window, a
join or a data store call was a query of its own (`failed:<node>`), now written by the tasks of the
query that computes it (deployer.spark.streams.spool); the dead-letters query wrote the rejected
records and late events of every source and the failures of every stateless operator, then only of
those two queries read or compute, now written by one of the queries that read the source or
compute the operator (deployer.spark.run.queries._by_readers); a stream's Sequencer kept Spark's event-time timers,
which it never set (`sequencer_timers`); a stream alone with WATERMARK 0 passed a Sequencer,
where its file source now marks its late events (`late_marked_by_sources`); a stream alone with a
WATERMARK delay whose order shows nowhere passed one too, now unheld, as are the streams of a merge
whose order shows nowhere, which passed the merge's Sequencers (`unheld_streams`); and a join
dropped an event at its stream's watermark as late, which its state now lets it take (`join_ties`);
and a SELECT that dropped a merge's event time left its rows' ids (`SEQ`) as they were, which now
carry the merge's order (`merge_order`), and so did one that dropped a delayed stream's, whose ids
now carry its release order (`release_order`); and every pattern sink was a query of its own, where
those over the same streams now share one (`patterns_apart`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from deployer.spark.run import dead_letter_owners, held
from deployer.spark.run.checkpoint import CheckpointRefused, apart_sinks, query_dir, shared_queries
from deployer.spark.run.pattern_groups import APART, MARK, PREFIX
from deployer.spark.run.queries import DEAD_LETTERS, SINGLE_READERS, Query, plan_queries
from deployer.spark.run.shared_record import SharedRecord
from deployer.spark.run.stateless_groups import is_shared
from operators import graph as g


def own_failure_queries(checkpoint: Path) -> set[str]:
    """The `failed:<node>` queries a checkpoint has: an earlier layout's, which ran every failure
    point after a window, a join or a data store call as a query of its own. They are resumed as
    such (their progress is their own), instead of written by their tasks (deployer.spark.streams.spool)."""
    if not checkpoint.is_dir():
        return set()
    return {f"failed:{d.name.removeprefix('failed_')}" for d in checkpoint.glob("failed_*") if d.is_dir()}


# Written into a checkpoint whose dead letters are written by the queries that read their sources
# when one query does (deployer.spark.run.queries._by_readers); a checkpoint with a dead-letters query
# and without it is of the earliest layout, whose dead-letters query wrote every source's.
_BY_READERS = "dead-letters-by-readers"
# Written as well when one of the queries that read a source writes its dead letters, however many
# read it; a checkpoint with a dead-letters query and `_BY_READERS` alone is of the layout between,
# whose dead-letters query wrote those of the sources and operators two queries compute.
_BY_ONE_READER = "dead-letters-by-one-reader"


def earlier_layout(checkpoint: Path) -> set[str]:
    """The queries of an earlier layout a checkpoint has, which its run keeps as they were: its
    `failed:<node>` queries (`own_failure_queries`), and its dead-letters query if it wrote the
    rejected records and late events of every source (`DEAD_LETTERS`) or of those that two queries
    read (`SINGLE_READERS`): resumed with what it wrote, its progress is its own. A checkpoint of
    this layout is marked so. And `APART` when the checkpoint's pattern sinks each have a query of
    their own (`patterns_apart`)."""
    kept = own_failure_queries(checkpoint) | ({APART} if patterns_apart(checkpoint) else set())
    if (checkpoint / query_dir(DEAD_LETTERS)).is_dir():
        if not (checkpoint / _BY_READERS).exists():
            return kept | {DEAD_LETTERS}
        if not (checkpoint / _BY_ONE_READER).exists():
            return kept | {SINGLE_READERS}
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / _BY_READERS).touch()
    (checkpoint / _BY_ONE_READER).touch()
    return kept


def planned(
    checkpoint: Path,
    graph: g.Graph,
    sinks: Collection[str],
    sources: Mapping[str, str],
    kinds: Mapping[str, str],
    kept: Collection[str],
) -> list[Query]:
    """The queries a run on `checkpoint` starts (queries.plan_queries, `kept`: `earlier_layout`): its
    shared queries keep their sinks (shared_record, and the `sink:<name>` queries it started keep
    theirs), its failure points their writers (dead_letter_owners); a sink one of its shared
    queries went on without is refused (`refuse_comebacks`)."""
    record = shared_queries(checkpoint)
    started = record.queries | apart_sinks(checkpoint, sinks)
    plan = plan_queries(graph, sinks, sources, kinds, kept, started, dead_letter_owners.read(checkpoint))
    refuse_comebacks(record, plan)
    return plan


def refuse_comebacks(record: SharedRecord, plan: Sequence[Query]) -> None:
    """Refuse a sink that a shared query of the checkpoint (of pattern or of stateless sinks) wrote,
    then went on without, and that the run's plan gives a new query, shared or its own
    (deployer.spark.run.shared_record): it would write the sink's rows again from the beginning.
    (The checkpoint guard of `cep run` says so first, before Spark starts; a service deployment has
    no guard.)"""
    back = sorted(
        s
        for q in plan
        if q.name.startswith((PREFIX, "sink:")) or is_shared(q.name)
        if q.name not in record.queries
        for s in q.writes
        if s.lower() in record.sinks
    )
    if back:
        raise CheckpointRefused(
            f"the sink(s) {', '.join(back)} were written before by a shared query (of pattern or of "
            "stateless sinks) that has gone on without them since: a new query would write their rows "
            "again from the beginning. Write them to sinks of other names, or start over on a new "
            "checkpoint"
        )


def patterns_apart(checkpoint: Path) -> bool:
    """Whether the pattern sinks of a run on `checkpoint` each keep a query of their own, rather than
    share one with the others that read the same streams (deployer.spark.run.pattern_groups): yes
    for a checkpoint with some query's state and not this layout's mark (each such query has its
    progress and state of its own, which a shared query could not take over); any other is marked
    and shares."""
    return not _stateful_layout(checkpoint, MARK)


# Written into a checkpoint whose Sequencers run without Spark's event-time timers.
_UNTIMED_SEQUENCERS = "sequencers-without-timers"


def sequencer_timers(checkpoint: Path) -> bool:
    """Whether the Sequencers of a run on `checkpoint` keep Spark's event-time timers
    (deployer.spark.streams.sequencer.sequenced). They set none, and without them a micro-batch of a
    stream with event time costs less (no timer state to load, list and commit, a shorter first
    plan); but Spark records an operator's time mode in its state and refuses to resume it in
    another. So a checkpoint that has some query's state and not this layout's mark keeps them; any
    other is marked and runs without."""
    return not _stateful_layout(checkpoint, _UNTIMED_SEQUENCERS)


# Written into a checkpoint whose file sources mark the late events of their streams alone with
# WATERMARK 0, which pass no Sequencer.
_MARKED_BY_SOURCES = "late-events-marked-by-sources"


def late_marked_by_sources(checkpoint: Path) -> bool:
    """Whether the file sources of a run on `checkpoint` mark the late events of their streams alone
    with WATERMARK 0 (deployer.spark.streams.file_source), which then pass no Sequencer. An earlier
    run's queries had a Sequencer's state there, which Spark finds by the stateful operator's place
    in the plan: without it, the operators after would each read the state of the one before. So a
    checkpoint that has some query's state and not this layout's mark keeps the Sequencers; any
    other is marked and runs without."""
    return _stateful_layout(checkpoint, _MARKED_BY_SOURCES)


# Written into a checkpoint whose joins take an event at its stream's watermark.
_JOIN_TIES = "joins-take-events-at-the-watermark"


def join_ties(checkpoint: Path) -> bool:
    """Whether the joins of a run on `checkpoint` take an event at its stream's watermark, as the
    language does (deployer.spark.translate.join): each side's state keeps a copy of its event time,
    which the rows an earlier layout's state holds have not. Spark resumes a join's state without
    checking it against the new schema (tried), and would read a copy those rows lack. So a
    checkpoint that has some query's state and not this layout's mark keeps its joins as they were
    (such an event dropped as late: docs/language.md, "Engines"); any other is marked and runs with."""
    return _stateful_layout(checkpoint, _JOIN_TIES)


def _stateful_layout(checkpoint: Path, mark: str) -> bool:
    """Whether a run on `checkpoint` takes the layout of its stateful operators that `mark` marks:
    yes if the checkpoint has the mark; no if it has some query's state without it (an earlier
    layout's, which Spark resumes only as it was written); otherwise yes, and the mark is written."""
    if (checkpoint / mark).exists():
        return True
    if held.has_state(checkpoint):
        return False
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / mark).touch()
    return True


def unheld_streams(checkpoint: Path, wanted: list[str], merges: Sequence[Sequence[str]] = ()) -> set[str]:
    """The streams with a WATERMARK delay, or in a merge, that pass no Sequencer in a run on
    `checkpoint` (deployer.spark.run.held; lower-case names), `wanted` those the script could leave
    so: those the checkpoint's queries were started with (its record), none for a checkpoint with
    some query's state and no record (an earlier layout's, whose Sequencers are in that state),
    `wanted` for one without state, recorded now. A stream recorded that is no longer wanted is
    refused (the run's checkpoint guard and the service refuse such a script before:
    deployer.spark.run.compat), and so is a merge (of `merges`, the streams sequenced together) of
    streams left unheld and held."""
    if not held.has_state(checkpoint):
        held.record(checkpoint, wanted)
        return set(wanted)
    before = held.recorded(checkpoint) or []
    problems = held.reheld(before, wanted) + held.split_merges(before, merges)
    if problems:
        raise CheckpointRefused(f"cannot resume from checkpoint {checkpoint}: " + "; ".join(problems))
    return set(before)


# Written into a checkpoint whose Maps keep a merge's order in the `SEQ` of the rows whose event
# time they drop.
_MERGE_ORDER = "selects-keep-a-merges-order"


def merge_order(checkpoint: Path) -> bool:
    """Whether the Maps of a run on `checkpoint` that drop a merge's event time keep its order in
    their rows' `SEQ` (deployer.spark.translate.stateless.map_in_time_order). `SEQ` is an event's id
    for an `ON SQL` update's exactly-once ledger and is kept in state: a micro-batch an earlier run
    left unfinished, replayed with other ids, would run its updates again. So a checkpoint that some
    query has run on (its offsets) and without this layout's mark keeps them as they were (docs/
    language.md, "Engines"); any other is marked and runs with."""
    return _marked_unless_run(checkpoint, _MERGE_ORDER)


def _marked_unless_run(checkpoint: Path, mark: str) -> bool:
    """Whether `checkpoint` has `mark`, which it gets now unless some query has run on it."""
    if (checkpoint / mark).exists():
        return True
    if any(any(d.iterdir()) for d in checkpoint.glob("*/offsets") if d.is_dir()):
        return False
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / mark).touch()
    return True


# Written into a checkpoint whose Maps keep a delayed stream's release order in the `SEQ` of the
# rows whose event time they drop.
_RELEASE_ORDER = "selects-keep-a-streams-release-order"


def release_order(checkpoint: Path) -> bool:
    """`merge_order` for the Maps that drop the event time of a delayed stream's released rows
    (deployer.spark.translate.stateless.map_in_release_order): a checkpoint some query has run on
    without this mark keeps them as they were."""
    return _marked_unless_run(checkpoint, _RELEASE_ORDER)


def translation(checkpoint: Path) -> tuple[bool, bool, bool]:
    """What the handlers of a run on `checkpoint` keep of the layout it was written by
    (deployer.spark.handlers.handlers_for): `join_ties`, `merge_order`, `release_order`."""
    return join_ties(checkpoint), merge_order(checkpoint), release_order(checkpoint)
