"""The manifest of a `cep run --checkpoint DIR`: a checkpoint that is missing, truncated or written by
a different script is refused with a clear error, never silently restarted from zero.

Why: Spark keeps one checkpoint per streaming query, in a sub-directory of DIR named after its
output (deployer.spark.run.deployment). Given a sub-directory that is gone, Spark quietly starts that query
over from the beginning of its inputs: every result is written again (appended rows doubled, file
sinks rewritten), and the exactly-once ledger, keyed by batch id, takes the new batches for replays
of the old ones and skips them. Given a changed script, Spark resumes from state that does not
match it, or fails late with a Java stack trace; given a truncated log file, it fails late too.

So DIR holds `cep-checkpoint.json`, written before the first query starts and updated as queries
start. It records, per output, what its checkpoint depends on (deployer.spark.run.compat's signature: inputs
with their bound URIs, stateful operators), and which queries have started (and so must have a
sub-directory). It never holds a data store URL or a credential: compat needs only the sources,
whose URIs are stored redacted. A restart is refused, before Spark starts, when:

- DIR is not empty and has no manifest (not a checkpoint of `cep run`, or its manifest was lost);
- an output the new run shares with the checkpoint reads other inputs or keeps other state
  (deployer.spark.run.compat's rule; a new output is fine: it starts from its own empty sub-directory);
- a sink would move into, out of or between the queries the stateless sinks share
  (deployer.spark.run.stateless_groups) or those pattern sinks share (deployer.spark.run.
  pattern_groups), whose sinks the checkpoint records when they start, or a sink removed from such
  a query would come back in another (deployer.spark.run.shared_record);
- a started query's sub-directory is gone, or its `metadata` or the latest file of one of its logs
  (`offsets/N`, `commits/N`, `sources/K/N`) does not parse;
- another run is using DIR: a run holds an exclusive lock on `DIR/.cep-checkpoint.lock` from its
  check until it ends (the kernel drops it when the process dies, however it dies). Two runs on one
  checkpoint would write the same batches' log entries, and Spark's checkpoint manager for local
  files (deployer.spark.run.session.SESSION_CONF) does not detect that.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from deployer.spark.run import compat, held, shared_record
from deployer.spark.run.pattern_groups import MARK, PREFIX
from deployer.spark.run.query_logs import query_problems
from deployer.spark.run.shared_record import SharedRecord
from deployer.spark.run.stateless_groups import SHARED_QUERY, is_shared
from deployer.spark.run.whole_json import write_whole
from operators import graph as g
from stores.urls import redact_text

MANIFEST = "cep-checkpoint.json"
_TMP = f".{MANIFEST}.tmp"  # written first, then renamed over the manifest
LOCK = ".cep-checkpoint.lock"  # held by the run using the directory; holds its process id
# Bumped when a checkpoint of the earlier version cannot be resumed: a manifest of another format
# is refused. 2: file sources read in arrival order (deployer.spark.streams.file_source), and every stream
# with event time passes the Sequencer, whose state Spark keeps in each query's checkpoint. 3: window
# aggregates keep exact sums, checked for overflow (a TIME window's sum of bigints as two sums, of
# integers with try_sum, of decimals in decimal(38, s); TUPLE and BATCH windows buffer the values
# in their own type), and decimal aggregates have new types (operators.decimals). 4: streams that
# meet in a merge pass the Sequencer together (deployer.spark.streams.merge_sequencer); the manifest records
# them ("merges"). Format 3 is resumed unless the script has such a merge (`_check`).
FORMAT = 4
OLDEST_FORMAT = 3  # the oldest this version resumes
START_OVER = (
    "use a new --checkpoint directory to start over (the inputs are then read again from their beginning)"
)


class CheckpointRefused(Exception):
    """The run cannot resume from its --checkpoint directory; the message says why and what to do."""


def arrival_log(directory: Path, stream: str) -> Path:
    """Where a file source's arrival log lives in the checkpoint DIR (deployer.spark.streams.file_source)."""
    return directory / "inputs" / f"{stream.lower()}.files"


def trigger_start(directory: Path, stream: str) -> Path:
    """Where a trigger's start lives in the checkpoint DIR (deployer.spark.streams.trigger_source)."""
    return directory / "inputs" / f"{stream.lower()}.trigger"


def query_dir(query: str) -> str:
    """The sub-directory of DIR that keeps a query's checkpoint ("table:bill" -> "table_bill")."""
    return query.replace(":", "_")


def _shown_uri(uri: str) -> str:
    """A source URI as the manifest keeps it: redacted, and a `file:` directory made absolute (the
    same directory given another way is the same input; the same relative path from another working
    directory is not)."""
    if uri.startswith("file:"):
        rest = uri[len("file:") :]
        return "file:" + os.path.abspath(rest[2:] if rest.startswith("//") else rest)
    return redact_text(uri)


def signatures(graph: g.Graph, sources: Mapping[str, str], sinks: Mapping[str, str]) -> dict[str, Any]:
    """deployer.spark.run.compat's signature of every output of a run, keyed "sink 'x'" / "table 'x'"."""
    shown = {stream: _shown_uri(uri) for stream, uri in sources.items()}
    return dict(compat.outputs(graph, shown, sinks))


def _output_key(query: str) -> str | None:
    """The compat key of a sink or table query ("sink:Bill" -> "sink 'bill'"); None for the others
    (dead letters, which compat does not cover)."""
    kind, _, name = query.partition(":")
    return f"{kind} '{name.lower()}'" if kind in ("sink", "table") and name else None


def _tuples(value: Any) -> Any:
    """JSON lists back into the nested tuples compat compares."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


# ---- the manifest ----------------------------------------------------------------------------------


class CheckpointGuard:
    """Checks DIR against a run before it starts (`open`), then records the queries it starts."""

    def __init__(
        self,
        directory: Path,
        manifest: dict[str, Any],
        outputs: dict[str, Any],
        shares: dict[str, list[str]] | None = None,
    ) -> None:
        self.directory = directory
        self.manifest = manifest
        self._outputs = outputs  # this run's signatures, recorded as their queries start
        self._shares = shares or {}  # the outputs of each shared query (of stateless or pattern sinks)
        # The held LOCK (`open`, `release`); a guard dropped unreleased lets it go when collected.
        self._lock: BinaryIO | None = None

    @classmethod
    def open(
        cls, directory: Path, graph: g.Graph, sources: Mapping[str, str], sinks: Mapping[str, str]
    ) -> CheckpointGuard:
        """The guard of a run with --checkpoint `directory`; raises CheckpointRefused when the run
        must not resume from it. A new (absent or empty) directory gets its manifest now."""
        outputs = signatures(graph, sources, sinks)
        apart = held.has_state(directory) and not (directory / MARK).exists()  # layout.patterns_apart
        merges = compat.merges(graph, sources)
        unheld = held.unheld(graph, sources, sinks)
        path = directory / MANIFEST
        shown_sources = {s: _shown_uri(u) for s, u in sorted(sources.items())}
        if directory.exists() and not directory.is_dir():
            raise CheckpointRefused(f"--checkpoint {directory} is a file, not a directory")
        # Checked before the lock is taken too: a directory that is not a checkpoint gets no lock file.
        _refuse_foreign(directory, path)
        directory.mkdir(parents=True, exist_ok=True)
        lock = _locked(directory)
        try:
            if not path.exists():
                _refuse_foreign(directory, path)
                manifest: dict[str, Any] = {"format": FORMAT, "created": _now(), "outputs": {}, "started": []}
            else:
                manifest = _read(path)
            # the shared queries as this run plans them (`shared_queries`)
            record = shared_queries(directory, manifest)
            own = apart_sinks(directory, sinks)  # as the deployment plans it (layout.planned)
            shared = compat.stateless_shares(graph, sinks, record.queries | own)
            patterns = {} if apart else compat.pattern_shares(graph, sinks, record.queries)
            if path.exists():
                _check(directory, manifest, outputs, (shared, patterns, record), merges, unheld)
            manifest.update(format=FORMAT, sources=shown_sources, merges=merges, updated=_now())
            guard = cls(directory, manifest, outputs, shared | patterns)
            guard._write()
            # Named only by a run that goes on: a refused one leaves the directory as it found it.
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n".encode("ascii"))
        except BaseException:
            lock.close()
            raise
        guard._lock = lock
        return guard

    def release(self) -> None:
        """Let another run use the directory (at the end of this one)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def started(self, query: str) -> None:
        """Record that `query` has started: from now on its sub-directory must be there, and its
        signature is what a later run is compared with."""
        key = _output_key(query)
        keys = [key] if key is not None else []
        changed = False
        if query in self._shares:  # its sinks are in the checkpoint's record (shared_record)
            keys = self._shares[query]
        for key in keys:
            if key in self._outputs:
                signature = json.loads(json.dumps(self._outputs[key]))
                changed |= self.manifest["outputs"].get(key) != signature
                self.manifest["outputs"][key] = signature
        if query not in self.manifest["started"]:
            self.manifest["started"].append(query)
            changed = True
        if changed:
            self._write()

    def _write(self) -> None:
        """Write the manifest whole or not at all (a crash mid-write must not leave half of it)."""
        write_whole(self.directory / MANIFEST, self.manifest)


def _refuse_foreign(directory: Path, manifest: Path) -> None:
    """Refuse a directory with files but no manifest (the temporary file of a first manifest whose
    writing was cut short, and the lock file, do not count)."""
    if manifest.exists() or not directory.is_dir():
        return
    if any(p.name not in (_TMP, LOCK) for p in directory.iterdir()):
        raise CheckpointRefused(
            f"cannot use {directory} as a checkpoint: it is not empty and has no {MANIFEST}, so "
            "it is not a checkpoint of `cep run` (or its manifest was lost, and with it what "
            f"its state belongs to); {START_OVER}"
        )


def _locked(directory: Path) -> BinaryIO:
    """DIR's lock file, open and locked exclusively; CheckpointRefused if another run holds it."""
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode("ascii", "replace").strip()
        os.close(fd)
        raise CheckpointRefused(
            f"--checkpoint {directory} is in use by another run"
            + (f" (process {holder})" if holder.isdigit() else "")
            + ": wait for it to end or stop it, or give this run another --checkpoint directory"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "r+b", buffering=0)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _read(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        fmt = manifest["format"]
        ok = isinstance(manifest["outputs"], dict) and isinstance(manifest["started"], list)
    except (OSError, ValueError, TypeError, KeyError):
        ok, fmt = False, None
    if not ok:
        raise CheckpointRefused(
            f"{path} is truncated or unreadable, so the checkpoint cannot be checked; {START_OVER}"
        )
    if isinstance(fmt, int) and fmt < OLDEST_FORMAT:
        raise CheckpointRefused(
            f"{path} was written by an earlier version of cep (format {fmt}), whose queries read their "
            f"sources and keep their state differently: Spark cannot resume them; {START_OVER}"
        )
    if not isinstance(fmt, int) or fmt > FORMAT:
        raise CheckpointRefused(
            f"{path} has format {fmt!r}, which this version of cep does not know (it knows {FORMAT}): "
            f"run the version that wrote it, or {START_OVER}"
        )
    return dict(manifest)


def _writers(
    manifest: dict[str, Any], outputs: Mapping[str, Any], shared: tuple[Any, Any, SharedRecord]
) -> list[str]:
    """compat.regrouped for a checkpoint: which queries had started are in the manifest, which sinks
    the shared ones wrote in its record (`shared`: the new run's shared queries, of stateless sinks
    and of pattern sinks, and the checkpoint's record, `shared_queries`)."""
    own = {key for q in manifest["started"] if (key := _output_key(q)) is not None}
    record = shared[2]
    keys = set(outputs)
    written = set(manifest["outputs"]) | {f"sink '{s}'" for s in record.sinks}
    stateless, patterns = (
        {q: [f"sink '{s}'" for s in sorted(sinks)] for q, sinks in record.queries.items() if which(q)}
        for which in (is_shared, lambda q: q.startswith(PREFIX))
    )
    # a sink its shared query went on without, back in a query of its own (one that would leave a
    # shared query for its own, or join or come back to one, regrouped says so)
    grouped = {
        key for groups in (*shared[:2], stateless, patterns) for members in groups.values() for key in members
    }
    back = [
        f"output {key} was written before by a shared query that has gone on without it since: a "
        "query of its own would write its rows again from the beginning (write it to a sink of another name)"
        for key in sorted(keys - grouped - own)
        if key.startswith("sink '") and key.removeprefix("sink '").removesuffix("'") in record.sinks
    ]
    return (
        compat.regrouped(stateless, shared[0], own, keys, written, "stateless sinks")
        + compat.regrouped(patterns, shared[1], own, keys, written)
        + back
    )


def _manifest_shares(manifest: Mapping[str, Any]) -> dict[str, list[str]]:
    """The shared queries a checkpoint's runs started -> the outputs each wrote (at its last
    start), as a manifest written before the record (shared_record) kept them."""
    shares = dict(manifest.get("patterns") or {})
    if manifest.get("shared"):
        shares[SHARED_QUERY] = manifest["shared"]
    return {q: keys for q, keys in shares.items() if q in manifest["started"]}


def shared_queries(directory: Path, manifest: Mapping[str, Any] | None = None) -> SharedRecord:
    """The shared queries (of stateless and of pattern sinks) the checkpoint DIR has started, and
    the sinks they have written (deployer.spark.run.shared_record; for a checkpoint of the time
    before that record, the manifest's; none for a new one): a run's shared queries keep their
    sinks and take no new one (deployer.spark.run.stateless_groups, .pattern_groups). `manifest`:
    DIR's, when the caller has read it already."""
    record = shared_record.read(directory) or SharedRecord()
    path = directory / MANIFEST
    if manifest is None and path.is_file():
        manifest = _read(path)
    # the record's first version kept the pattern sinks' queries only: the manifest has the others
    kept = compat.sinks_of(_manifest_shares(manifest)) if manifest is not None else {}
    missing = {q: sinks for q, sinks in kept.items() if q not in record.queries}
    return SharedRecord(record.queries | missing, record.sinks.union(*missing.values()))


def apart_sinks(directory: Path, sinks: Iterable[str]) -> dict[str, set[str]]:
    """The `sink:<name>` queries among `sinks`' that the checkpoint DIR has started (their
    sub-directories are there), as deployer.spark.run.stateless_groups takes them: a sink that had a
    query of its own keeps it."""
    return {f"sink:{s}": {s.lower()} for s in sinks if (directory / query_dir(f"sink:{s}")).is_dir()}


def _check(
    directory: Path,
    manifest: dict[str, Any],
    outputs: Mapping[str, Any],
    shared: tuple[Any, Any, SharedRecord],
    merges: list[list[str]],
    unheld: list[str],
) -> None:
    if manifest["format"] < 4 and merges:
        raise CheckpointRefused(
            f"{directory / MANIFEST} was written by an earlier version of cep (format {manifest['format']}), "
            f"which sequenced the streams of a merge ({compat.shown(merges)}) one by one: Spark cannot "
            f"resume their state; {START_OVER}"
        )
    before = {key: _tuples(sig) for key, sig in manifest["outputs"].items()}
    problems = compat.compare(before, outputs) + _writers(manifest, outputs, shared)
    problems += compat.remerged(manifest.get("merges") or [], merges) + held.refusals(directory, unheld)
    if problems:
        raise CheckpointRefused(
            f"cannot resume from checkpoint {directory}: it was written by a different script or with "
            "other --source or --sink bindings, and resuming would misread its state: "
            + "; ".join(problems)
            + f". Run the script it was written by, or {START_OVER}"
        )
    broken = [
        why
        for query in _used(manifest["started"], outputs)
        for why in query_problems(directory / query_dir(query), query)
    ]
    if manifest["started"]:
        broken += [
            f"the arrival log of stream '{stream}', {arrival_log(directory, stream)}, is missing, and with "
            "it which of its files were read, in which order"
            for stream, uri in (manifest.get("sources") or {}).items()
            if uri.startswith("file:") and not arrival_log(directory, stream).is_file()
        ]
    if broken:
        raise CheckpointRefused(
            f"cannot resume from checkpoint {directory}: " + "; ".join(broken) + ". From what is left, "
            "Spark would start over and write again what was already written, or fail. Restore it, "
            f"or {START_OVER}"
        )


def _used(started: Iterable[str], outputs: Mapping[str, Any]) -> list[str]:
    """The started queries the new run resumes: its sinks and tables, and every dead-letter query
    (whose names follow node ids, so whether the new run has one is not known before Spark)."""
    return [q for q in started if (key := _output_key(q)) is None or key in outputs]
