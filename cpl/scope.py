"""Name resolution: which fields an expression of a statement can see (`Scope`, one `Input` per
stream, ON SQL result or join side) and how a name becomes a positional `Col`."""

from __future__ import annotations

from dataclasses import dataclass, field

from cpl import syntax_tree as ast
from cpl.errors import TypeCheckError
from operators import expr as ir
from operators.datatypes import Schema


@dataclass
class Input:
    """One input of a statement as seen by its expressions."""

    schema: Schema
    qualifiers: frozenset[str]  # lower-case stream names and aliases that may prefix its fields
    side: int = 0
    offset: int = 0  # where its fields start in the side's tuple (ON SQL result columns follow the event)


@dataclass
class Scope:
    inputs: list[Input] = field(default_factory=list)

    def resolve(self, name: ast.Name) -> ir.Col:
        parts = name.parts
        if len(parts) == 2:
            q, f = parts[0].lower(), parts[1]
            owners = [i for i in self.inputs if q in i.qualifiers]
            if not owners:
                known = sorted({q for i in self.inputs for q in i.qualifiers})
                raise TypeCheckError(
                    f"unknown stream or alias '{parts[0]}'; known here: {', '.join(known)}", name.pos
                )
            for inp in owners:
                fd = inp.schema.get(f)
                if fd is not None:
                    return self._col(inp, fd.name, parts[0])
            raise TypeCheckError(
                f"'{parts[0]}' has no field '{f}'; its fields: {_fields(owners[0].schema)}", name.pos
            )
        f = parts[0]
        hits = [(i, i.schema.get(f)) for i in self.inputs if i.schema.get(f) is not None]
        if not hits:
            fields = ", ".join(_fields(i.schema) for i in self.inputs) or "none"
            raise TypeCheckError(f"unknown field '{f}'; the fields here are: {fields}", name.pos)
        if len(hits) > 1:
            quals = [sorted(i.qualifiers)[0] for i, _ in hits]
            raise TypeCheckError(
                f"field '{f}' is ambiguous: it is in {' and '.join(quals)}; qualify it, e.g. {quals[0]}.{f}",
                name.pos,
            )
        inp, fd = hits[0]
        assert fd is not None
        return self._col(inp, fd.name, None)

    @staticmethod
    def _col(inp: Input, name: str, qualifier: str | None) -> ir.Col:
        fd = inp.schema.get(name)
        assert fd is not None
        return ir.Col(fd.type, inp.offset + inp.schema.position(name), fd.name, inp.side, qualifier)


def _fields(schema: Schema) -> str:
    return ", ".join(schema.names)
