"""`cep`: the command-line interface of PaaS-CEP.

    cep check SCRIPT... [--store N=URL]  compile, report every error, exit 1 if any
    cep explain SCRIPT [--format ...]    show the operator graph (text, json or mermaid)
    cep run SCRIPT --source S=URI ...    run a script (engine: spark, or local without a JVM)

Each compiles the script with its data stores bound as `cep run` binds them (`--store`,
CEP_STORE_<NAME>_URL, the embedded default), which describe the result types of its SELECTs
(docs/language.md, "Result types").

No Python or lark stack trace reaches the user: compile errors are diagnostics, run-time failures a
one-line message (add --debug for the trace).

`cep run` on Spark stops between micro-batches on SIGTERM (exit 0: a stop asked for, as by a service
manager) or SIGINT (Ctrl-C: exit 130, the shell's code for an interrupted command, so that
`cep run ... && next` does not go on); a second signal stops it at once.
"""

from __future__ import annotations

import importlib
import signal
from collections.abc import Mapping, Sequence

import click

from cpl.compiler import Compiled
from cpl.errors import CompileError
from deployer.cli.common import friendly, pairs, read_script
from deployer.engine import RunFailed, RunRequest
from deployer.runner import compile_bound, run_script
from deployer.spark.run.checkpoint import CheckpointRefused
from deployer.spark.run.queries import describe, plan_queries
from operators import explain as dump
from operators import graph as g


class UsageError(click.ClickException):
    exit_code = 2


def _compile(
    path: str, stores: Mapping[str, str], quiet_warnings: bool = False, engine: str | None = None
) -> Compiled:
    """The script at `path` compiled with its data stores bound as `cep run` binds them (`--store`,
    CEP_STORE_<NAME>_URL, the embedded default), which describe the result types of its SELECTs.
    Its warnings are printed, for a run on `engine` only those that concern it (`cep check` knows
    no engine and prints them all)."""
    source, name = read_script(path)
    try:
        compiled = compile_bound(source, name, stores)
    except CompileError as err:
        click.echo(err.render(), err=True)
        raise SystemExit(1) from None
    if not quiet_warnings:
        for w in compiled.warnings:
            if engine is None or w.engine in (None, engine):
                click.echo(w.render(source, name), err=True)
    return compiled


_friendly = friendly()


class _Commands(click.Group):
    """The group of `cep`'s commands, the service's (deployer/cli/service.py) imported only when one
    of them is asked for: they bring the catalog's ORM, about a tenth of a second of every `cep run`,
    `cep check` and `cep explain` that do not use it."""

    SERVICE = ("db", "deploy", "ls", "status", "stop", "start", "undeploy", "serve")

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.SERVICE})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.SERVICE and cmd_name not in self.commands:
            service = importlib.import_module("deployer.cli.service")
            for name in self.SERVICE:
                self.add_command(getattr(service, name))
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show Python tracebacks for unexpected errors.")
@click.version_option(package_name="paascep", prog_name="cep")
def cli(debug: bool) -> None:
    """PaaS-CEP: continuous queries in CPL, compiled to operator graphs and run on Spark."""


_STORE_HELP = "Bind a data store to a URL (as for `cep run`): the result types of its SELECTs come from it."


@cli.command()
@click.argument("scripts", nargs=-1, required=True, metavar="SCRIPT...")
@click.option("--store", "stores", multiple=True, metavar="NAME=URL", help=_STORE_HELP)
@_friendly
def check(scripts: Sequence[str], stores: Sequence[str]) -> None:
    """Compile SCRIPT(s) and report every error; exit 1 when any script is invalid."""
    failed = False
    bound = _pairs(stores, "--store")
    for path in scripts:
        try:
            compiled = _compile(path, bound)
        except SystemExit:
            failed = True
            continue
        g = compiled.graph
        ops = sum(1 for n in g.nodes if n.op not in ("Source", "Sink"))
        click.echo(f"{path}: ok ({len(g.sources())} input streams, {ops} operators)")
    if failed:
        raise SystemExit(1)


@cli.command()
@click.argument("script")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "mermaid", "queries"]),
    default="text",
    show_default=True,
    help="text: stable dump; json: {nodes, edges}; mermaid: paste into Markdown to draw it; "
    "queries: the Spark streaming queries a run writing every unread stream starts.",
)
@click.option("--store", "stores", multiple=True, metavar="NAME=URL", help=_STORE_HELP)
@_friendly
def explain(script: str, fmt: str, stores: Sequence[str]) -> None:
    """Show the operator graph SCRIPT compiles to."""
    graph = _compile(script, _pairs(stores, "--store")).graph
    if fmt == "queries":
        out = _queries(graph)
    else:
        out = {"text": dump.to_text, "json": dump.to_json, "mermaid": dump.to_mermaid}[fmt](graph)
    click.echo(out, nl=not out.endswith("\n"))


def _queries(graph: g.Graph) -> str:
    """The Spark query split of a run with every stream no statement reads as a sink, file sources
    and the data stores bound to their declared kind (deployer.spark.run.queries)."""
    sinks = [n.stream for n in graph.nodes if isinstance(n, g.Sink)]
    sources = {s.stream: f"file:{s.stream}" if s.trigger is None else "trigger:" for s in graph.sources()}
    kinds = {name: store.type for name, store in graph.stores.items()}
    return describe(graph, plan_queries(graph, sinks, sources, kinds))


_pairs = pairs


@cli.command()
@click.argument("script")
@click.option(
    "--engine",
    type=click.Choice(["spark", "local"]),
    default="spark",
    show_default=True,
    help="spark: Structured Streaming; local: the in-process reference executor (no JVM).",
)
@click.option(
    "--source", "sources", multiple=True, metavar="STREAM=URI", help="Input: file:DIR or - (stdin)."
)
@click.option("--sink", "sinks", multiple=True, metavar="STREAM=URI", help="Output: file:DIR or console.")
@click.option("--store", "stores", multiple=True, metavar="NAME=URL", help="Bind a data store to a URL.")
@click.option("--dead-letter", metavar="URI", help="Where bad events go (default: a dead-letter dir).")
@click.option("--until-idle", is_flag=True, help="Stop once the input is consumed instead of watching it.")
@click.option("--checkpoint", metavar="DIR", help="Spark: checkpoint dir; a restart resumes from it.")
@click.option("--master", metavar="URL", default=None, help="Spark master (default local[*]).")
@click.option(
    "--max-files-per-trigger",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Spark: read at most N new files of a file: source per micro-batch (default: all).",
)
@friendly(CheckpointRefused, RunFailed)  # the user's to fix: no --debug hint
def run(
    script: str,
    engine: str,
    sources: Sequence[str],
    sinks: Sequence[str],
    stores: Sequence[str],
    dead_letter: str | None,
    until_idle: bool,
    checkpoint: str | None,
    master: str | None,
    max_files_per_trigger: int | None,
) -> None:
    """Run SCRIPT: read its input streams, write its results."""
    bound = _pairs(stores, "--store")
    compiled = _compile(script, bound, engine=engine)
    request = RunRequest(
        graph=compiled.graph,
        engine=engine,
        sources=_pairs(sources, "--source"),
        sinks=_pairs(sinks, "--sink"),
        stores=bound,
        dead_letter=dead_letter,
        until_idle=until_idle,
        checkpoint=checkpoint,
        master=master,
        max_files_per_trigger=max_files_per_trigger,
    )
    if run_script(request).stopped_by == signal.SIGINT:
        raise SystemExit(130)


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="cep")
