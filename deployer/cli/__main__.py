"""`python -m deployer.cli` runs `cep`."""

from deployer.cli.main import main

main()
