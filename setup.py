"""The packages of the wheel; everything else about the build is in pyproject.toml.

pyproject.toml can either find packages or list them, not find them and add one under another name:
the catalog's Alembic project, the folder `migrations/` of the checkout, is shipped as the package
`paascep_migrations`, because a top-level `migrations` would overwrite, or be shadowed by, the one
of any other distribution that ships a package of that name (docs/architecture.md).
"""

from setuptools import find_packages, setup

PACKAGES = ("cpl", "operators", "stores", "deployer")  # shipped as they are, with their subpackages
RENAMED = {"paascep_migrations": "migrations"}  # package: the folder it is shipped from


def packages() -> list[str]:
    found = find_packages(include=[name for top in PACKAGES for name in (top, f"{top}.*")])
    for name, folder in RENAMED.items():
        found += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]
    return found


setup(packages=packages(), package_dir=RENAMED)
