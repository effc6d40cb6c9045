#!/bin/bash
# Stand-in for the entrypoint of the upstream code-interpreter image: run the given command,
# or keep the container alive when there is none.
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
exec tail -f /dev/null
