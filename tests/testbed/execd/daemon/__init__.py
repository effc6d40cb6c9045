"""The testbed's stand-in for OpenSandbox's execd daemon (Python 3.11 standard library only).

It answers execd's HTTP API as the recorded real daemons do, one execd generation (profile) at
a time. Start reading at `routes.py`, the table of every route; README.md beside this file
tells what each module does, how the daemon is run and packed into the execd image as one file
(`/execd`, a zip application), and what it reproduces of the real daemons and what not.
"""
