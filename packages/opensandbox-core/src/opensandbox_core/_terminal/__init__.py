"""Interactive terminals over execd's `/pty` WebSocket (see `_handle.Terminal`)."""
