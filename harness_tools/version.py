"""The engine's version, recorded with every evaluation (its own module so no engine module imports the face)."""

__version__ = "0.1.0"
