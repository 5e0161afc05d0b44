"""py4j's lookups of the JVM's names, remembered: each is asked of the JVM once per gateway.

py4j resolves `jvm.org.apache.spark.sql.functions` with one round trip to the JVM per dotted part
asked for (`JVMView`, `JavaPackage`), and a class's static method with another (`JavaClass`), every
time, before the call itself. PySpark goes that way on every function it wraps (`F.col`, `F.lit`,
`when`, ... through `_get_jvm_function`) and on every list of columns it converts (`PythonUtils`):
three round trips where one does. Translating the small bench's stateless job made 2,894 round
trips from the driver's thread, 1,113 of them such lookups (0.34 of its 3.0 s of round trips; ad
hoc, the deployment's construction and start in `cep run --until-idle`, every `send_command` timed).

What a name resolves to is a fact of the JVM's classes, which do not change while it runs: a package
stays a package, a class's method stays a method. So the answer is kept on the object that asked
(the view, the package, the class), where Python's own attribute lookup finds it next time without
calling `__getattr__`. Only packages, classes and methods are kept: a static field's value is
asked for every time, as py4j does. A view's short names (`java_import`) are kept as resolved the
first time. A new JVM has a new gateway, with views and classes of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from py4j import java_gateway as jg

_INSTALLED = "_cep_remembers_names"


def _remembering(original: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def lookup(self: Any, name: str) -> Any:
        found = original(self, name)
        if isinstance(found, jg.JavaPackage | jg.JavaClass | jg.JavaMember) and not name.startswith("_"):
            self.__dict__[name] = found
        return found

    return lookup


def remember_names() -> None:
    """Have py4j keep what the JVM's names resolve to (see the module's docstring); once per process."""
    if getattr(jg, _INSTALLED, False):
        return
    for kind in (jg.JVMView, jg.JavaPackage, jg.JavaClass):
        kind.__getattr__ = _remembering(kind.__getattr__)
    setattr(jg, _INSTALLED, True)
