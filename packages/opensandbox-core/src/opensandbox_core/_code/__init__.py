"""The code facet, `session.code`: code run in Jupyter kernels through execd's `/code`.

- `_facet`: `CodeInterpreter` (run, contexts), what the session knows of its contexts;
- `_runner`: one run (stream, record, timeout, cancellation, a dead kernel);
- `_kernel`: what runs inside a kernel (the recorder, the bash wrapper) and its records (pure);
- `_model`: `Execution`, `CodeResult`, `CodeError`, `CodeContext` (pure);
- `_probe`: whether the sandbox can run a language (answers within seconds);
- `_errors`: the facet's errors.
"""

from ._errors import (
    CodeContextBusyError,
    CodeContextNotFoundError,
    CodeInterpreterUnavailableError,
    CodeTimeoutError,
)
from ._facet import CodeInterpreter
from ._model import CodeContext, CodeError, CodeResult, Execution

__all__ = [
    "CodeContext",
    "CodeContextBusyError",
    "CodeContextNotFoundError",
    "CodeError",
    "CodeInterpreter",
    "CodeInterpreterUnavailableError",
    "CodeResult",
    "CodeTimeoutError",
    "Execution",
]
