"""Code for an agent's tools (`CodeTool`): `run_code`, a run in a kernel as text and images.

- `_render`: an `Execution` (or a timed-out run's) as what a model reads (pure);
- `_tool`: `CodeTool`, the tool's name, description and schema, and its kernel per sandbox.
"""
