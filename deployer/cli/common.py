"""Pieces shared by the `cep` commands (deployer.cli and deployer.cli.service)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def friendly(*plain: type[Exception]) -> Callable[[F], F]:
    """Errors as one line on stderr and exit 1, never a traceback (unless `cep --debug`).

    Exceptions of the `plain` types are the user's to fix and are shown without the --debug hint.
    """

    def decorate(fn: F) -> F:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (click.ClickException, SystemExit, KeyboardInterrupt):
                raise
            except plain as err:
                click.echo(f"error: {err}", err=True)
                raise SystemExit(1) from None
            except Exception as err:
                if click.get_current_context().find_root().params.get("debug"):
                    raise
                click.echo(f"error: {err or type(err).__name__} (run with --debug for details)", err=True)
                raise SystemExit(1) from None

        return wrapper  # type: ignore[return-value]

    return decorate


def pairs(values: Sequence[str], what: str) -> dict[str, str]:
    """`NAME=URI` options as a dict; a malformed one is a usage error naming the option."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, uri = v.partition("=")
        if not sep or not name or not uri:
            raise click.UsageError(f"{what} takes NAME=URI, not {v!r}")
        out[name] = uri
    return out


def read_script(path: str) -> tuple[str, str]:
    """The text of a CPL script (`-` is stdin) and the name diagnostics show for it."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return Path(path).read_text(encoding="utf-8"), path
    except FileNotFoundError:
        raise click.UsageError(f"no such script: {path}") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise click.UsageError(f"cannot read script {path}: {err.__class__.__name__}") from None
