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
- a sink would move into or out of the query the stateless sinks share (deployer.spark.run.shared),
  or into, out of or between the queries pattern sinks share (deployer.spark.run.pattern_groups),
  whose sinks the manifest records when they start;
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
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from deployer.spark.run import compat, held
from deployer.spark.run.pattern_groups import MARK
from deployer.spark.run.queries import SHARED_QUERY
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


# ---- the files Spark writes ------------------------------------------------------------------------

_VERSION = re.compile(r"v\d+")


def _latest(log: Path) -> Path | None:
    """The newest file of one of Spark's logs: files are named by batch ("7", or "7.compact" for a
    file source's compacted log); dot-files are checksums and temporary files."""
    best: tuple[int, Path] | None = None
    for p in log.iterdir() if log.is_dir() else ():
        stem = p.name.removesuffix(".compact")
        if stem.isdigit() and p.is_file() and (best is None or int(stem) > best[0]):
            best = (int(stem), p)
    return best[1] if best else None


def _log_problem(path: Path, min_lines: int) -> str | None:
    """Why a log file does not parse: Spark writes a version line ("v1"), then one JSON value per line
    (an offsets file writes "-" for a source that has no offset yet)."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as err:
        return f"cannot be read ({type(err).__name__})"
    if lines and lines[-1] == "":  # a trailing newline
        lines.pop()
    if not lines or not _VERSION.fullmatch(lines[0]):
        return "is empty" if not lines else "does not start with a version line such as v1"
    for n, line in enumerate(lines[1:], start=2):
        if line == "-":
            continue
        try:
            json.loads(line)
        except ValueError:
            return f"line {n} is not JSON"
    if len(lines) < min_lines:
        return f"has {len(lines)} line(s), fewer than the {min_lines} it must have"
    return None


def query_problems(qdir: Path, query: str) -> list[str]:
    """What is wrong with the checkpoint of one started query, each naming the file."""
    if not qdir.is_dir():
        return [f"the checkpoint of {query}, {qdir}, is missing though an earlier run started it"]
    problems = []
    meta = qdir / "metadata"
    try:
        ok = isinstance(json.loads(meta.read_text(encoding="utf-8")).get("id"), str)
    except (OSError, ValueError, AttributeError):
        ok = False
    if not ok:
        problems.append(f"{meta} is {'missing' if not meta.exists() else 'truncated or unreadable'}")
    # offsets: version, batch metadata, one offset per source; commits: version, one JSON line.
    logs = [(qdir / "offsets", 3), (qdir / "commits", 2)]
    sources = qdir / "sources"
    logs += [(d, 2) for d in sorted(sources.iterdir()) if d.is_dir()] if sources.is_dir() else []
    newest: dict[str, int] = {}
    for log, min_lines in logs:
        latest = _latest(log)
        if latest is None:
            continue
        newest[log.name] = int(latest.name.removesuffix(".compact"))
        why = _log_problem(latest, min_lines)
        if why is not None:
            problems.append(f"{latest} {why} (truncated or corrupted)")
    if newest.get("commits", -1) > newest.get("offsets", -1):
        problems.append(
            f"{qdir / 'commits'} records batch {newest['commits']}, but {qdir / 'offsets'} has no file for it"
        )
    return problems


# ---- the manifest ----------------------------------------------------------------------------------


class CheckpointGuard:
    """Checks DIR against a run before it starts (`open`), then records the queries it starts."""

    def __init__(
        self,
        directory: Path,
        manifest: dict[str, Any],
        outputs: dict[str, Any],
        shared: list[str] | None = None,
        patterns: dict[str, list[str]] | None = None,
    ) -> None:
        self.directory = directory
        self.manifest = manifest
        self._outputs = outputs  # this run's signatures, recorded as their queries start
        self._shared = shared or []  # the outputs the shared query writes (deployer.spark.run.shared)
        self._patterns = patterns or {}  # the outputs of each query pattern sinks share
        # The held LOCK (`open`, `release`); a guard dropped unreleased lets it go when collected.
        self._lock: BinaryIO | None = None

    @classmethod
    def open(
        cls, directory: Path, graph: g.Graph, sources: Mapping[str, str], sinks: Mapping[str, str]
    ) -> CheckpointGuard:
        """The guard of a run with --checkpoint `directory`; raises CheckpointRefused when the run
        must not resume from it. A new (absent or empty) directory gets its manifest now."""
        outputs = signatures(graph, sources, sinks)
        shared = compat.shared(graph, sinks)
        apart = held.has_state(directory) and not (directory / MARK).exists()  # layout.patterns_apart
        patterns = {} if apart else compat.pattern_shares(graph, sinks)
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
                manifest = {"format": FORMAT, "created": _now(), "outputs": {}, "started": []}
            else:
                manifest = _read(path)
                _check(directory, manifest, outputs, (shared, patterns), merges, unheld)
            manifest.update(format=FORMAT, sources=shown_sources, merges=merges, updated=_now())
            guard = cls(directory, manifest, outputs, shared, patterns)
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
        if query == SHARED_QUERY:
            keys = self._shared
            changed = self.manifest.get("shared") != keys
            self.manifest["shared"] = keys
        elif query in self._patterns:
            keys, shares = self._patterns[query], self.manifest.setdefault("patterns", {})
            changed, shares[query] = shares.get(query) != keys, keys
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
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / MANIFEST
        tmp = path.with_name(_TMP)
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(self.manifest, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


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


def _writers(manifest: dict[str, Any], outputs: Mapping[str, Any], shared: tuple[Any, Any]) -> list[str]:
    """compat.regrouped and .repatterned for a checkpoint: which queries had started, and which sinks
    the shared ones wrote (`shared`: the new run's, stateless and pattern ones), are in the manifest."""
    own = {key for q in manifest["started"] if (key := _output_key(q)) is not None}
    before = list(manifest.get("shared") or []) if SHARED_QUERY in manifest["started"] else []
    patterns = {q: keys for q, keys in (manifest.get("patterns") or {}).items() if q in manifest["started"]}
    keys = set(outputs)
    return compat.regrouped(before, shared[0], own, keys) + compat.repatterned(patterns, shared[1], own, keys)


def _check(
    directory: Path,
    manifest: dict[str, Any],
    outputs: Mapping[str, Any],
    shared: tuple[list[str], Any],
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


def drop_interrupted_log_writes(location: Path) -> None:
    """Remove what a crash left of a query's offsets or commits log entry being written.

    Spark writes each entry to a hidden temp file (`.0.<uuid>.tmp`) and renames it into place. A
    crash in between leaves the temp file, which Spark never reads, but which makes Spark 4 refuse,
    on every restart, a query that had not logged its first batch yet: "[STATE_STORE_CHECKPOINT_
    LOCATION_NOT_EMPTY] ... offsets should be empty on batch 0" (SIGKILL at a random point, tests/
    faults/test_materialize_kill.py, left one in the dead letters' query). Dropping it is safe: the
    entry was never written, so the batch is planned again, as after any crash before its offsets.
    """
    for log in ("offsets", "commits"):
        for partial in (location / log).glob(".*.tmp*"):
            partial.unlink(missing_ok=True)
