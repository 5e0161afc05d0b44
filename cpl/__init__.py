"""cpl package."""
