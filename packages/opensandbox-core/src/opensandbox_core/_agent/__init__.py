"""The neutral building blocks of a framework adapter (`opensandbox_core.adapters`): keyword
tables, provisioning, terminal tools per scope. A framework's own semantics live in its adapter."""
