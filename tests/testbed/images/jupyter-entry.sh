#!/bin/bash
# Entrypoint of the testbed's code-interpreter image (/opt/code-interpreter/code-interpreter.sh):
# starts the Jupyter server the way upstream's code-interpreter image does (notebook on
# 127.0.0.1:44771, token auth, as root, no browser; kernelspecs `python` and `bash`), in the
# background with its log in JUPYTER_LOG, then runs the given command, or keeps the container
# alive when there is none. execd (started before this by bootstrap.sh) reaches the server through
# JUPYTER_HOST and JUPYTER_TOKEN, which the image sets; until the server answers (about 3 s) execd
# retries creating a context.
port=${JUPYTER_PORT:-44771}
token=${JUPYTER_TOKEN:-opensandboxcodeinterpreterjupyter}
log=${JUPYTER_LOG:-/var/log/jupyter.log}
if [ -x /opt/jupyter/bin/python ]; then
    PATH=/opt/jupyter/bin:$PATH /opt/jupyter/bin/python -m notebook --ip=127.0.0.1 \
        --port="$port" --allow-root --no-browser --NotebookApp.token="$token" \
        >>"$log" 2>&1 </dev/null &
fi
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
exec tail -f /dev/null
