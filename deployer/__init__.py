"""deployer package."""
