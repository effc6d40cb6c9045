"""Terminals for an agent's tools (`TerminalTools`): start, send keys, read, close, as text; and
the framework packages' registry of them, one per scope (`ScopedTerminalTools`)."""
