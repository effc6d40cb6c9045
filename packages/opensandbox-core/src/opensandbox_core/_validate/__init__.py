"""Every argument check of opensandbox-core and its adapters, in one place. No I/O.

Each function raises `ConfigurationError` (a `ValueError`) when a value is wrong, or
`ArgumentTypeError` (a `ConfigurationError` that is also a `TypeError`) when it has the wrong type,
so that the core's callers can catch `ConfigurationError` and the adapters' callers the builtin
`TypeError`/`ValueError` their frameworks document, from the same check. Checks that normalise a
value return it. Each call path checks an argument once; nothing outside this package raises for
a bad argument (`tests/unit/test_repo_rules.py` holds the core to that, with the few raises of
other kinds it allows and why).

Single values (`_values`; its `__all__` is this package's and `opensandbox_core.validation`'s):

- time: `seconds` (a number with a minimum), `timeout` (command timeouts, None allowed),
  `duration` (number or `timedelta`), `idle_lifetime` (None or 0 = no limit), `zero_is_none`;
- commands: `command_text` (a shell line or an argv list, as the shell line sent to execd),
  `argv`, `command_form` (the shell flag of adapters: string with `shell=True`, argv without);
- environment and labels: `env` (also for metadata and resource maps);
- places: `working_dir`, `path`, `mode`, `port`;
- sizes and counts: `max_output`, `output_cap`, `non_negative_int`, `positive_int`, `int_between`;
- sandboxes: `image`, `entrypoint`, `sandbox_id`, `one_of` (create or attach, not both),
  `non_empty_string`, `byte_data`, `request_timeout`, `domain`.

Also there, for the core only (imported `as` themselves below, not in `__all__`): `flag`,
`choice`, `instance`, `sequence_of`, `int_at_least`; and `unicode` (no lone surrogate), which the
other modules here use for every text that goes out as UTF-8.

The core's own calls (`_calls`, core only): `volume`, `egress_rule`, `network_policy`,
`create_options` (a `SandboxSpec`'s create options), `spec_table` (an adapter's keyword table),
`spec_keywords` (adapter keywords beside `spec=`); `write_data`, `replacement`, `remote_dir`, `glob_pattern`, `exclude_patterns`,
`grep_patterns`, `grep_filters` (files); `keep_running` (background processes);
`started_session`, `snapshot_source`, `snapshot_id`, `restore_lifetime`, `removal_selectors`
(snapshots, removal); `label_value`, `keyed_factories` (keyed sandboxes);
`terminal_command`, `terminal_size`, `terminal_id`, `terminal_input`, `terminal_pattern`,
`terminal_wait` (interactive terminals).

The code facet's checks (`_code`, core only): `code_text`, `code_language`, `code_context`,
`code_cwd`.

The agent tools' checks (`_tools`, core only): `tool_spec`, `tool_arguments` (a model's tool
call), `tool_text`, `keys_text`, `wait_pattern`, `tool_wait`, `rebound_session` (the terminal
tools); `run_timeout` (the code tool).
"""

from ._calls import create_options as create_options
from ._calls import egress_rule as egress_rule
from ._calls import exclude_patterns as exclude_patterns
from ._calls import glob_pattern as glob_pattern
from ._calls import grep_filters as grep_filters
from ._calls import grep_patterns as grep_patterns
from ._calls import keep_running as keep_running
from ._calls import keyed_factories as keyed_factories
from ._calls import label_value as label_value
from ._calls import network_policy as network_policy
from ._calls import remote_dir as remote_dir
from ._calls import removal_selectors as removal_selectors
from ._calls import replacement as replacement
from ._calls import restore_lifetime as restore_lifetime
from ._calls import snapshot_id as snapshot_id
from ._calls import snapshot_source as snapshot_source
from ._calls import spec_keywords as spec_keywords
from ._calls import spec_table as spec_table
from ._calls import started_session as started_session
from ._calls import terminal_command as terminal_command
from ._calls import terminal_id as terminal_id
from ._calls import terminal_input as terminal_input
from ._calls import terminal_pattern as terminal_pattern
from ._calls import terminal_size as terminal_size
from ._calls import terminal_wait as terminal_wait
from ._calls import volume as volume
from ._calls import write_data as write_data
from ._code import code_context as code_context
from ._code import code_cwd as code_cwd
from ._code import code_language as code_language
from ._code import code_text as code_text
from ._tools import keys_text as keys_text
from ._tools import rebound_session as rebound_session
from ._tools import run_timeout as run_timeout
from ._tools import tool_arguments as tool_arguments
from ._tools import tool_spec as tool_spec
from ._tools import tool_text as tool_text
from ._tools import tool_wait as tool_wait
from ._tools import wait_pattern as wait_pattern
from ._values import *  # noqa: F403  (the public checks, `opensandbox_core.validation`)
from ._values import __all__ as __all__
from ._values import choice as choice
from ._values import flag as flag
from ._values import instance as instance
from ._values import int_at_least as int_at_least
from ._values import sequence_of as sequence_of
