"""The wire: execd's HTTP client, its event stream and framing, and the one event reader."""
