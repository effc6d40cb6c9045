"""Terminals for an agent's tools (`TerminalTools`): start, send keys, read, close, as text."""
