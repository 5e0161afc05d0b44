"""Triggers' clock and ticking, shared by both engines (docs/language.md, "Triggers")."""
