"""Targets and the markdown rendering of a results dict (the JSON written next to it)."""

from __future__ import annotations

import math
from typing import Any

OURS_COMMANDS = ("deepagents aexecute", "deepagents execute (sync)", "pydantic-ai run")
OURS_NATIVE = ("core native", "pydantic-ai native")
OURS_MEMORY = ("core", "pydantic-ai", "deepagents")


def _ms(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    return f"{seconds * 1000:.1f}" if seconds < 10 else f"{seconds * 1000:.0f}"


def _x(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.2f}x" if value < 100 else f"{value:.0f}x"


def _cell(stats: dict[str, Any]) -> str:
    if stats.get("skipped") or not stats.get("n"):
        return f"skipped ({stats.get('skipped', 'no data')})"
    return f"{_ms(stats['median'])} ({_ms(stats['p10'])}–{_ms(stats['p90'])})"


def _worst(items: list[tuple[str, float]]) -> tuple[str, float] | None:
    items = [(n, v) for n, v in items if v is not None and not math.isnan(v)]
    return max(items, key=lambda item: item[1]) if items else None


TOOL_GOALS = {"write": 3.0, "read": 3.0, "ls": 3.0, "glob": 3.0, "edit": 2.0}
GREP_NOISE = 0.95
"""`grep` "never slower": its median within 5 % of BaseSandbox's (run-to-run noise)."""
FLAT_PAGES = 1.5
"""Per-page time "flat": the slowest size's median per page within 1.5x of the fastest's."""


def _tool_targets(tools: dict[str, Any] | None, add: Any) -> None:
    if not tools:
        return
    speedup = tools.get("speedup", {})
    kinds = tools.get("implementation", {})
    for op, goal in TOOL_GOALS.items():
        if op in speedup:
            value = speedup[op]
            add(
                f"Deep Agents `{op}` vs BaseSandbox default",
                f">= {goal:g}x faster",
                _x(value),
                not math.isnan(value) and value >= goal,
                kinds.get(op, ""),
            )
    if "grep" in speedup:
        value = speedup["grep"]
        add(
            "Deep Agents `grep` vs BaseSandbox default",
            "never slower, same results",
            _x(value),
            not math.isnan(value) and value >= GREP_NOISE,
            f"{kinds.get('grep', '')}; results compared equal on every call",
        )
    threads = tools.get("threads") or {}
    for op, value in threads.get("ratio", {}).items():
        add(
            f"Deep Agents thread backend `{op}` vs plain backend",
            f"<= {threads['goal']:g}x",
            _x(value),
            not math.isnan(value) and value <= threads["goal"],
            "ThreadSandboxBackend -> the thread's OpenSandboxBackend, same sandbox, interleaved",
        )
    sizes = (tools.get("paged") or {}).get("sizes", {})
    eight = sizes.get("8 MiB")
    if eight:
        value = eight["ratio_to_read_bytes"]
        add(
            "Deep Agents paged `read`, 8 MiB text, all pages",
            "<= 1.5x core read_bytes",
            _x(value),
            not math.isnan(value) and value <= 1.5,
            f"{eight['pages']} pages, {_ms(eight['per_page'].get('median'))} ms a page",
        )
    per_page = {
        size: case["per_page"]["median"]
        for size, case in sizes.items()
        if case["per_page"].get("n")
    }
    if len(per_page) >= 2:
        spread = max(per_page.values()) / min(per_page.values())
        add(
            "paged `read`: time per page, 1 to 64 MiB",
            f"flat (within {FLAT_PAGES:g}x)",
            _x(spread),
            spread <= FLAT_PAGES,
            ", ".join(f"{size} {_ms(v)} ms" for size, v in per_page.items()),
        )


def _wire_targets(wire: dict[str, Any] | None, add: Any) -> None:
    """Issue 37's rows: each core operation against the one request execd needs, per profile."""
    from bench._wire import GOALS

    for profile, rows in (wire or {}).get("profiles", {}).items():
        for row, goal in GOALS.items():
            case = rows.get(row)
            if not case:
                continue
            value = case["ratio"]
            add(
                f"{row} vs the raw request, execd {profile}",
                f"<= {goal:g}x",
                _x(value),
                value is not None and not math.isnan(value) and value <= goal,
                f"core {_cell(case['core'])} ms, raw {_cell(case['raw'])} ms",
            )


def _wire_table(wire: dict[str, Any]) -> list[str]:
    """Section 7: the core against the raw requests, profiles side by side."""
    profiles = list(wire["profiles"])
    lines = [
        "",
        f"### 7. The core against execd's own requests ({wire['repetitions']} interleaved rounds)",
        "",
        "| operation | " + " | ".join(f"core / raw, {p}" for p in profiles) + " |",
        "|---|" + "---|" * len(profiles),
    ]
    for row in next(iter(wire["profiles"].values()), {}):
        cells = []
        for profile in profiles:
            case = wire["profiles"][profile].get(row)
            if case and "median" in case["core"] and "median" in case["raw"]:
                cells.append(
                    f"{_ms(case['core']['median'])} / {_ms(case['raw']['median'])} ms, "
                    f"{_x(case['ratio'])}"
                )
            else:
                cells.append("-")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(name: str, goal: str, measured: str, ok: bool | None, detail: str) -> None:
        status = "n/a" if ok is None else ("PASS" if ok else "MISS")
        rows.append(
            {"target": name, "goal": goal, "measured": measured, "status": status, "detail": detail}
        )

    cmd = results.get("commands", {}).get("cases", {}).get("true")
    if cmd:
        ratios = cmd["ratio_to_sdk"]
        worst = _worst([(n, ratios[n]) for n in OURS_COMMANDS if n in ratios])
        if worst:
            add(
                "adapter overhead per command (`true`)",
                "<= 1.10x raw SDK",
                _x(worst[1]),
                worst[1] <= 1.10,
                f"worst adapter: {worst[0]}; core {_x(ratios.get('core run'))}; adapters over "
                f"core: {', '.join(_x(cmd['ratio_to_core'][n]) for n in OURS_COMMANDS if n in ratios)}",
            )
    shapes = results.get("output_cost", {}).get("shapes", {})
    for label, per_profile in shapes.items():
        for profile, case in per_profile.items():
            ours = {n: r for n, r in case["ratio_to_baseline"].items() if not n.startswith("raw")}
            worst = _worst(list(ours.items()))
            if worst:
                add(
                    f"output of {label} on {profile}",
                    "<= 2x `true` + read_bytes",
                    _x(worst[1]),
                    worst[1] <= 2.0,
                    f"worst client: {worst[0]}; "
                    + ", ".join(f"{n} {_x(r)}" for n, r in case["ratio_to_baseline"].items()),
                )
    term = results.get("terminal")
    if term and "ratio_to_raw" in term:
        value = term["ratio_to_raw"]
        add(
            "keystroke round trip, core Terminal vs raw websockets",
            "<= 1.5x",
            _x(value),
            value is not None and not math.isnan(value) and value <= 1.5,
            "one byte written, its echo read (`cat` in raw mode), same execd terminal; "
            + ", ".join(f"{n} {_cell(s)} ms" for n, s in term["stats"].items()),
        )
    _wire_targets(results.get("wire"), add)
    code = results.get("code_run")
    if code and "ratio_to_raw" in code:
        value = code["ratio_to_raw"]
        chart = code.get("chart_ratio_to_raw")
        add(
            "`1 + 1` through session.code.run vs raw /code",
            "<= 1.5x",
            _x(value),
            value is not None and not math.isnan(value) and value <= 1.5,
            "same context, the raw stream read to its end; "
            + ", ".join(f"{n} {_cell(s)} ms" for n, s in code["one_plus_one"].items())
            + f"; a chart's PNG (core plt.show vs raw last expression) {_x(chart)}: "
            + ", ".join(f"{n} {_cell(s)} ms" for n, s in code["chart_png"].items()),
        )
    gen = results.get("generations", {}).get("cases", {}).get("true")
    if gen:
        legacy = gen["ratio_to_1.1"].get("1.0.19")
        add(
            "`true` on execd 1.0.19 vs 1.1 (core)",
            "<= 1.5x",
            _x(legacy),
            legacy is not None and not math.isnan(legacy) and legacy <= 1.5,
            "line-framed 1.0.19 (exact output from the raw output files) against events that "
            f"keep their line endings; 1.0.18 {_x(gen['ratio_to_1.1'].get('1.0.18'))}",
        )
    eight = results.get("transfers", {}).get("sizes", {}).get("8 MiB")
    if eight:
        shell = eight["shell_over_native"].get("pydantic-ai native")
        skipped = results["transfers"]["skipped"].get("8 MiB", {}).get("pydantic-ai shell fallback")
        if shell is not None and not math.isnan(shell):
            add(
                "8 MiB round trip vs shell path",
                ">= 20x faster",
                _x(shell),
                shell >= 20,
                "pydantic-ai native vs the same backend driven as commands-only",
            )
        elif skipped:
            add(
                "8 MiB round trip vs shell path",
                ">= 20x faster",
                "shell path skipped",
                None,
                f"shell path projected at {skipped:.0f} s",
            )
        worst = _worst([(n, eight["ratio_to_sdk"].get(n, math.nan)) for n in OURS_NATIVE])
        if worst:
            add(
                "8 MiB round trip vs raw SDK",
                "<= 1.5x raw SDK",
                _x(worst[1]),
                worst[1] <= 1.5,
                f"worst: {worst[0]}",
            )
    small = results.get("transfers", {}).get("sizes", {}).get("4 KiB")
    if small and "core native" in small.get("ratio_to_sdk", {}):
        value = small["ratio_to_sdk"]["core native"]
        add(
            "4 KiB write + read, core vs raw SDK",
            "<= 1.5x raw SDK",
            _x(value),
            not math.isnan(value) and value <= 1.5,
            "atomic write (temporary name + rename) against the SDK's plain overwrite",
        )
    mem = results.get("memory", {}).get("variants", {})
    ours = [
        (k, v["overhead_mib"])
        for k, v in mem.items()
        if k.split()[0] in OURS_MEMORY and "overhead_mib" in v
    ]
    worst = _worst(ours)
    if worst:
        add(
            "client memory, 64 MiB transfer",
            "< 32 MiB above baseline",
            f"{worst[1]:.1f} MiB",
            worst[1] < 32,
            f"worst of ours: {worst[0]} (a read's own 64 MiB result not counted)",
        )
    create = results.get("create")
    if create:
        add(
            "create to first command",
            "<= 0.6x raw SDK",
            _x(create["ratio"]),
            create["ratio"] <= 0.6,
            f"core {_ms(create['stats']['core'].get('median'))} ms, raw SDK "
            f"{_ms(create['stats']['raw SDK'].get('median'))} ms",
        )
    for case in results.get("scale", {}).get("cases", []):
        if (
            case["command"] == "sleep 1"
            and case["concurrency"] == 32
            and case["layout"] == "1 sandbox"
        ):
            wall = case["wall_s"]
            add(
                "32 concurrent `sleep 1`, one sandbox",
                "< 2 s wall",
                f"{wall['median']:.2f} s",
                wall["max"] < 2.0,
                f"max of {wall['n']}: {wall['max']:.2f} s",
            )
    _tool_targets(results.get("deepagents_tools"), add)
    return rows


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"## Benchmark results ({'quick' if results['quick'] else 'full'} run, {m['date']}, "
        f"{results.get('server', 'testbed')})",
        "",
        f"- Machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB RAM, "
        f"kernel {m['kernel']}, load average at start {', '.join(f'{x:.2f}' for x in m['load_average_at_start'])}",
        f"- Python {m['python']}, Docker {m['docker']}, commit {m['git_commit']}, "
        f"run took {results['duration_s']:.0f} s",
        "- Packages: " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()),
        "- Times in ms: median (p10–p90). Every comparison was run interleaved in one process "
        "on the same sandbox; ratios are of medians.",
        "",
    ]
    for note in results.get("notes", []):
        lines.append(f"- Note: {note}")
    lines += ["", "### Targets", "", "| target | goal | measured | status | detail |"]
    lines.append("|---|---|---|---|---|")
    for row in results["targets"]:
        lines.append(
            f"| {row['target']} | {row['goal']} | {row['measured']} | **{row['status']}** | "
            f"{row['detail']} |"
        )
    cmd = results.get("commands")
    if cmd:
        lines += ["", f"### 1. Command round trip ({cmd['repetitions']} interleaved rounds)", ""]
        lines += [
            "| client | `true` | to SDK | to core | 1 MiB stdout | to SDK | to core |",
            "|---|---|---|---|---|---|---|",
        ]
        t, big = cmd["cases"]["true"], cmd["cases"]["1 MiB stdout"]
        for name in t["stats"]:
            lines.append(
                f"| {name} | {_cell(t['stats'][name])} | {_x(t['ratio_to_sdk'][name])} | "
                f"{_x(t['ratio_to_core'][name])} | {_cell(big['stats'][name])} | "
                f"{_x(big['ratio_to_sdk'][name])} | {_x(big['ratio_to_core'][name])} |"
            )
    tr = results.get("transfers")
    if tr:
        lines += ["", "### 2. File transfer: write + read round trip", ""]
        lines += [
            "| size | client | round trip | write | read | ratio to SDK | shell path / this |"
        ]
        lines.append("|---|---|---|---|---|---|---|")
        for label, data in tr["sizes"].items():
            for name, stats in data["round_trip"].items():
                lines.append(
                    f"| {label} ×{data['repetitions']} | {name} | {_cell(stats)} | "
                    f"{_cell(data['write'][name])} | {_cell(data['read'][name])} | "
                    f"{_x(data['ratio_to_sdk'].get(name))} | {_x(data['shell_over_native'].get(name))} |"
                )
            for name, projected in tr["skipped"].get(label, {}).items():
                lines.append(
                    f"| {label} | {name} | skipped: projected {projected:.0f} s (> 60 s) | | | | |"
                )
    mem = results.get("memory")
    if mem:
        lines += [
            "",
            f"### Client memory for one {mem['size_mib']} MiB transfer (a subprocess each)",
            "",
        ]
        lines += [
            "| client, operation | baseline | peak | above baseline | minus the result held |"
        ]
        lines.append("|---|---|---|---|---|")
        for name, v in mem["variants"].items():
            if "error" in v:
                lines.append(f"| {name} | error: {v['error'][:120]} | | | |")
                continue
            lines.append(
                f"| {name} | {v['baseline_mib']} MiB | {v['peak_mib']} MiB | "
                f"{v['above_baseline_mib']} MiB | {v['overhead_mib']} MiB |"
            )
    create = results.get("create")
    if create:
        lines += [
            "",
            f"### 3. Create to first command done ({create['repetitions']} interleaved rounds)",
            "",
        ]
        lines += ["| client | create + `true` |", "|---|---|"]
        for name, stats in create["stats"].items():
            lines.append(f"| {name} | {_cell(stats)} |")
        lines.append(f"| ratio core / SDK | {_x(create['ratio'])} |")
        if "pool_ratio" in create:
            lines.append(f"| ratio warm pool / core cold create | {_x(create['pool_ratio'])} |")
    sc = results.get("scale")
    if sc:
        lines += [
            "",
            f"### 4. Concurrency (core session; {sc['repetitions']} rounds, layouts interleaved)",
            "",
        ]
        lines += [
            "| command | concurrent | layout | commands | wall s (median) | commands/s | latency median ms | latency p90 ms | CPU % of one core |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in sc["cases"]:
            cpu = ", ".join(f"{k} {v:.0f}" for k, v in c["cpu_percent"].items() if v >= 1)
            lines.append(
                f"| `{c['command']}` | {c['concurrency']} | {c['layout']} | {c['commands_per_run']} | "
                f"{c['wall_s']['median']:.2f} | {c['throughput_per_s']['median']:.1f} | "
                f"{_ms(c['latency_median_s'])} | {_ms(c['latency_p90_s'])} | {cpu} |"
            )
    tools = results.get("deepagents_tools")
    if tools:
        lines += [
            "",
            f"### 5. Deep Agents file tools over {tools['files']} files (per call, interleaved)",
            "",
        ]
        speedup = tools.get("speedup", {})
        kinds = tools.get("implementation", {})
        lines += [
            "| tool | adapter | BaseSandbox default | speedup | adapter's implementation |",
            "|---|---|---|---|---|",
        ]
        for op, variants in tools["ops"].items():
            native = variants.get("adapter (native)", {})
            base = variants.get("BaseSandbox default", {})
            lines.append(
                f"| `{op}` | {_cell(native)} | {_cell(base)} | {_x(speedup.get(op))} | "
                f"{kinds.get(op, '-')} |"
            )
        threads = tools.get("threads")
        if threads:
            lines += [
                "",
                "Thread backend: each tool through `ThreadSandboxBackend` and through the thread's "
                "own `OpenSandboxBackend`, same sandbox, interleaved:",
                "",
                "| tool | thread backend | plain backend | ratio |",
                "|---|---|---|---|",
            ]
            for op, variants in threads["ops"].items():
                cells = list(variants.values())
                lines.append(
                    f"| `{op}` | {_cell(cells[0])} | {_cell(cells[1])} | "
                    f"{_x(threads['ratio'].get(op))} |"
                )
        paged = tools.get("paged")
        if paged:
            lines += [
                "",
                f"Deep Agents `read` of a whole text file, {paged['page_lines']} lines a page, "
                "against the core's `read_bytes` of the same file (interleaved):",
                "",
                "| file | pages | all pages | core read_bytes | ratio | per page |",
                "|---|---|---|---|---|---|",
            ]
            for size, case in paged["sizes"].items():
                st = case["stats"]
                lines.append(
                    f"| {size} ×{case['repetitions']} | {case['pages']} | "
                    f"{_cell(st['deepagents read, all pages'])} | {_cell(st['core read_bytes'])} | "
                    f"{_x(case['ratio_to_read_bytes'])} | {_cell(case['per_page'])} |"
                )
    cost = results.get("output_cost")
    if cost and cost.get("skipped"):
        lines += ["", f"### 7. output cost: skipped ({cost['skipped']})"]
    elif cost:
        lines += [
            "",
            "### 7. output cost: a command's output against `true` + `read_bytes` of its bytes",
            "",
            "| output | profile | baseline | core run | deepagents aexecute | pydantic-ai run "
            "| raw SDK |",
            "|---|---|---|---|---|---|---|",
        ]
        for label, per_profile in cost["shapes"].items():
            for profile, case in per_profile.items():
                st, rt = case["stats"], case["ratio_to_baseline"]
                cells = " | ".join(
                    f"{_cell(st[n])} ({_x(rt[n])})"
                    for n in ("core run", "deepagents aexecute", "pydantic-ai run")
                )
                sdk = st["raw SDK commands.run"]
                sdk_cell = (
                    f"{_cell(sdk)} ({_x(rt['raw SDK commands.run'])})"
                    if not sdk.get("skipped")
                    else f"skipped: {sdk['skipped']}"
                )
                lines.append(
                    f"| {label} ×{case['repetitions']} | {profile} | "
                    f"{case['baseline_seconds'] * 1000:.1f} ms | {cells} | {sdk_cell} |"
                )
    gens = results.get("generations")
    if gens and gens.get("skipped"):
        lines += ["", f"### 6. execd generations: skipped ({gens['skipped']})"]
    elif gens:
        lines += [
            "",
            "### 6. execd generations (testbed daemon profiles, core, one sandbox each)",
            "",
        ]
        profiles = gens["profiles"]
        lines += [
            "| case | " + " | ".join(f"{p} | to 1.1" for p in profiles) + " |",
            "|---|" + "---|---|" * len(profiles),
        ]
        for label, case in gens["cases"].items():
            cells = " | ".join(
                f"{_cell(case['stats'][p])} | {_x(case['ratio_to_1.1'][p])}" for p in profiles
            )
            lines.append(f"| {label} ×{case['repetitions']} | {cells} |")
    if results.get("wire"):
        lines += _wire_table(results["wire"])
    return "\n".join(lines) + "\n"
