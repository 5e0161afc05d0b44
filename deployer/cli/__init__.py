"""`cep`: the command-line interface (`deployer.cli.main`; the service commands in `deployer.cli.service`).

`main` is the console entry point (pyproject.toml) and `cli` the click group, for programs and tests
that invoke the commands in-process."""

from deployer.cli.main import cli, main

__all__ = ["cli", "main"]
