"""`python -m bench.compare BEFORE [--after TREE] [--quick] [--rounds N] [--only SECTION ...]`:
the bench of two versions of the repository, section by section, alternated, in one table.

BEFORE (and `--after`, by default this tree) is a commit, run from a temporary worktree of this
repository that is removed afterwards, or the path of a tree. Each version runs its own
`tests/bench` against its own packages: an interpreter environment per version puts that tree's
`packages/*/src` and `tests` in front of this interpreter's site-packages (so the bench's
subprocesses, `memory`'s among them, import that version too). Both use the same testbed and
image. Only the sections both versions have are run. Each section runs in its own process, once
per version per round, and the order alternates (before, after, after, before, ...) so that both
see the same load; the load average is recorded beside every run.

The table compares each target row of the report (mostly ratios interleaved inside one run, which
is what cancels the load) and then every median time in the results: the value of a row is the
median over the rounds, each round's value in brackets. A row is called `slower` only when every
round of the after side is worse than every round of the before side, `slower?` when the
medians differ by more than 10 % in the worse direction but the rounds overlap.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOISE = 0.10
"""A worse median by more than this, with overlapping rounds, is flagged `slower?`."""


@dataclass
class Version:
    """One side of the comparison: its tree and the interpreter that imports that tree."""

    label: str
    tree: Path
    python: Path = Path()
    commit: str = ""
    sections: list[str] = field(default_factory=list)


@dataclass
class Run:
    version: str
    section: str
    round: int
    load: tuple[float, float]  # 1-minute load average before and after the run
    seconds: float
    results: dict[str, Any] | None
    error: str | None = None


# -- preparing the versions ----------------------------------------------------------------------


@contextlib.contextmanager
def _tree(spec: str, workdir: Path, label: str) -> Iterator[Path]:
    """A tree for `spec`: the path itself, or a temporary worktree of a commit of this repo."""
    path = Path(spec)
    if path.is_dir():
        yield path.resolve()
        return
    target = workdir / f"tree-{label}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(target), spec],
        check=True,
    )
    try:
        yield target
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(target)], check=False
        )


def _environment(version: Version, workdir: Path) -> Path:
    """An interpreter environment whose imports resolve to `version.tree` first, then to this
    interpreter's site-packages (the frameworks, the SDK, the server)."""
    env_dir = workdir / f"env-{version.label}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    paths = sorted(str(p) for p in (version.tree / "packages").glob("*/src"))
    lines = [*paths, str(version.tree / "tests")]
    lines.append(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})")
    (Path(site) / "bench-compare.pth").write_text("\n".join(lines) + "\n")
    return python


def _probe(version: Version) -> None:
    """The version's sections and commit; and a check that its own core is the one imported."""
    code = (
        "import json, opensandbox_core; from bench.__main__ import SECTIONS; "
        "print(json.dumps([opensandbox_core.__file__, list(SECTIONS)]))"
    )
    out = subprocess.run(
        [str(version.python), "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=version.tree,
        env=_child_env(),
    ).stdout
    core_file, version.sections = json.loads(out.strip().splitlines()[-1])
    if not Path(core_file).resolve().is_relative_to(version.tree):
        raise SystemExit(f"{version.label}: opensandbox_core comes from {core_file}")
    version.commit = subprocess.run(
        ["git", "-C", str(version.tree), "rev-parse", "--short", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the environment's .pth decides what is imported
    return env


# -- running -------------------------------------------------------------------------------------


def _run(version: Version, section: str, quick: bool, out: Path) -> Run:
    round_no = 0  # the next free: runs added later with `--add` count as more rounds
    while (out / f"{version.label}-{section}-{round_no}").exists():
        round_no += 1
    target = out / f"{version.label}-{section}-{round_no}"
    target.mkdir(parents=True)
    args = [str(version.python), "-m", "bench", "--only", section, "--out", str(target)]
    if quick:
        args.insert(3, "--quick")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with open(target.with_suffix(".log"), "w") as log:
        proc = subprocess.run(
            args, cwd=version.tree, env=_child_env(), stdout=log, stderr=subprocess.STDOUT
        )
    seconds = time.perf_counter() - started
    load = (load_before, os.getloadavg()[0])
    error = None
    if proc.returncode != 0:
        tail = target.with_suffix(".log").read_text().strip().splitlines()[-3:]
        error = " / ".join(tail)
    info = {"commit": version.commit, "load": load, "seconds": seconds, "error": error}
    (target / "run.json").write_text(json.dumps(info) + "\n")
    return _loaded(target)


def load_runs(out: Path) -> tuple[list[Run], dict[str, str]]:
    """The runs an earlier comparison left in `out` (`LABEL-SECTION-ROUND/`), and each
    label's commit: a table again, or with runs added by a later `--only` call."""
    runs: list[Run] = []
    commits: dict[str, str] = {}
    for meta in sorted(out.glob("*-*-*/run.json")):
        run = _loaded(meta.parent)
        commits[run.version] = json.loads(meta.read_text())["commit"]
        runs.append(run)
    return runs, commits


def _loaded(target: Path) -> Run:
    """The run recorded in `target` (`LABEL-SECTION-ROUND/`: run.json, and the bench's
    latest.json when it ended well)."""
    label, _, rest = target.name.partition("-")
    section, _, round_no = rest.rpartition("-")
    info = json.loads((target / "run.json").read_text())
    latest = target / "latest.json"
    results = json.loads(latest.read_text()) if latest.exists() and not info["error"] else None
    load = (float(info["load"][0]), float(info["load"][1]))
    return Run(label, section, int(round_no), load, info["seconds"], results, info["error"])


def run_all(
    versions: tuple[Version, Version], sections: list[str], rounds: int, quick: bool, out: Path
) -> list[Run]:
    """Every section once per version per round, alternating which version goes first."""
    runs: list[Run] = []
    step = 0
    for round_no in range(rounds):
        for section in sections:
            order = versions if step % 2 == 0 else versions[::-1]
            step += 1
            for version in order:
                run = _run(version, section, quick, out)
                runs.append(run)
                status = f"error: {run.error}" if run.error else "ok"
                print(
                    f"[compare] round {round_no + 1}/{rounds} {section:<17} {version.label:<6} "
                    f"{run.seconds:6.0f} s, load {run.load[0]:.1f} -> {run.load[1]:.1f}, {status}",
                    file=sys.stderr,
                    flush=True,
                )
    return runs


# -- the table -----------------------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def measured_value(text: str) -> float | None:
    """The number of a report's `measured` cell ("4.74x", "2.05 s", "2.8 MiB"); None if none."""
    match = _NUMBER.search(text)
    return float(match.group()) if match else None


def higher_is_better(goal: str) -> bool:
    """A target row's direction, from its goal: ">= 3x faster" and "never slower" want more."""
    return goal.startswith(">=") or "never slower" in goal


def target_values(results: dict[str, Any]) -> dict[str, tuple[str, float]]:
    """Target row -> (goal, value) of one run's results."""
    rows: dict[str, tuple[str, float]] = {}
    for row in results.get("targets", []):
        value = measured_value(str(row["measured"]))
        if value is not None:
            rows[str(row["target"])] = (str(row["goal"]), value)
    return rows


def median_values(results: dict[str, Any], skip: frozenset[str]) -> dict[str, float]:
    """Every `median` of the results' statistics, by its path ("commands/cases/true/...")."""
    found: dict[str, float] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("median"), int | float) and node.get("n"):
                found["/".join(path)] = float(node["median"])
                return
            for key, child in node.items():
                walk(child, (*path, str(key)))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, (*path, _item_name(child, index)))

    walk({k: v for k, v in results.items() if k not in skip}, ())
    return found


def _item_name(item: Any, index: int) -> str:
    """A list item's name in a path: the scale section's cases name themselves."""
    if isinstance(item, dict) and {"command", "concurrency", "layout"} <= item.keys():
        return f"{item['command']} x{item['concurrency']} {item['layout']}"
    return str(index)


def _median(values: list[float]) -> float:
    data = sorted(values)
    middle = len(data) // 2
    return data[middle] if len(data) % 2 else (data[middle - 1] + data[middle]) / 2


def verdict(before: list[float], after: list[float], higher_better: bool) -> str:
    """`slower` when every after round is worse than every before round (two rounds a side at
    least), `slower?` when only the medians are worse by more than NOISE, `faster`/`faster?`
    alike, otherwise `same`."""
    if not before or not after:
        return "-"
    sign = 1.0 if higher_better else -1.0
    b, a = _median(before), _median(after)
    if b == 0:
        return "-"
    gain = sign * (a - b) / abs(b)
    ours, theirs = [sign * v for v in after], [sign * v for v in before]  # higher is better
    if min(len(ours), len(theirs)) >= 2:  # one round on a side shows no spread
        if max(ours) < min(theirs):
            return "slower"
        if min(ours) > max(theirs):
            return "faster"
    if gain < -NOISE:
        return "slower?"
    if gain > NOISE:
        return "faster?"
    return "same"


def _fmt(value: float, unit: str) -> str:
    if unit == "ms":
        ms = value * 1000
        return f"{ms:.1f}" if ms < 1000 else f"{ms:.0f}"
    return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"


def _cell(values: list[float], unit: str) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return _fmt(values[0], unit)
    return f"{_fmt(_median(values), unit)} ({', '.join(_fmt(v, unit) for v in values)})"


def _change(before: list[float], after: list[float]) -> str:
    if not before or not after or _median(before) == 0:
        return "-"
    return f"{_median(after) / _median(before):.2f}x"


def collect(runs: list[Run], label: str) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """One version's target rows (goal, values over rounds) and medians (values over rounds)."""
    targets: dict[str, Any] = {}
    medians: dict[str, list[float]] = {}
    for run in runs:
        if run.version != label or run.results is None:
            continue
        for name, (goal, value) in target_values(run.results).items():
            targets.setdefault(name, {"goal": goal, "values": []})["values"].append(value)
        skip = frozenset({"machine", "targets", "notes", "quick", "duration_s", "server"})
        for path, value in median_values(run.results, skip).items():
            medians.setdefault(path, []).append(value)
    return targets, medians


def table(runs: list[Run], commits: dict[str, str]) -> str:
    """The comparison's markdown: the target rows, then every median time."""
    b_targets, b_medians = collect(runs, "before")
    a_targets, a_medians = collect(runs, "after")
    loads = {label: [x for r in runs if r.version == label for x in r.load] for label in commits}
    rounds = {
        label: len({(r.section, r.round) for r in runs if r.version == label}) for label in commits
    }
    lines = [
        "; ".join(
            f"{label} = {commits[label]}: {rounds[label]} section runs, load {min(vals):.1f}-{max(vals):.1f}"
            for label, vals in loads.items()
            if vals
        )
        + ". A value is the median over the rounds (each round's in brackets).",
        "",
    ]
    errors = [r for r in runs if r.error]
    for run in errors:
        lines.append(f"- error: {run.version} {run.section} round {run.round + 1}: {run.error}")
    if errors:
        lines.append("")
    lines += ["| row | goal | before | after | change | verdict |", "|---|---|---|---|---|---|"]
    for name in [*a_targets, *(n for n in b_targets if n not in a_targets)]:
        goal = (a_targets.get(name) or b_targets[name])["goal"]
        bv = b_targets.get(name, {}).get("values", [])
        av = a_targets.get(name, {}).get("values", [])
        lines.append(
            f"| {name} | {goal} | {_cell(bv, '')} | {_cell(av, '')} | {_change(bv, av)} | "
            f"{verdict(bv, av, higher_is_better(goal))} |"
        )
    lines += [
        "",
        "Median times (ms; a throughput in commands/s), by their path in the results:",
        "",
        "| median | before | after | change | verdict |",
        "|---|---|---|---|---|",
    ]
    for path in (p for p in a_medians if p in b_medians):
        bv, av = b_medians[path], a_medians[path]
        throughput = "throughput" in path
        unit = "" if throughput else "ms"
        lines.append(
            f"| {path} | {_cell(bv, unit)} | {_cell(av, unit)} | {_change(bv, av)} | "
            f"{verdict(bv, av, throughput)} |"
        )
    return "\n".join(lines) + "\n"


# -- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("before", nargs="?", help="a commit of this repository, or a tree's path")
    parser.add_argument("--after", default=str(ROOT), help="a commit or a tree (default: this)")
    parser.add_argument(
        "--quick", action="store_true", help="each run is `python -m bench --quick`"
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs per version and section")
    parser.add_argument("--only", nargs="+", help="these sections (default: all both have)")
    parser.add_argument("--skip", nargs="+", default=[], help="leave these sections out")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "compare")
    parser.add_argument(
        "--add", action="store_true", help="keep the runs already in --out (more rounds)"
    )
    parser.add_argument(
        "--table", action="store_true", help="only print the table of the runs in --out"
    )
    args = parser.parse_args()
    if not args.table:
        if args.before is None:
            parser.error("BEFORE is needed, except with --table")
        _compare(args)
    runs, commits = load_runs(args.out)
    text = table(runs, commits)
    (args.out / "compare.md").write_text(text)
    print(text)
    print(f"[compare] wrote {args.out / 'compare.md'}", file=sys.stderr)


def _compare(args: argparse.Namespace) -> None:
    from bench.__main__ import _load_env

    _load_env()  # the testbed's settings, passed to both versions
    if args.out.exists() and not args.add:
        for old in (*args.out.glob("before-*"), *args.out.glob("after-*")):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-compare-")))
        versions = (Version("before", Path()), Version("after", Path()))
        for version, spec in zip(versions, (args.before, args.after), strict=True):
            version.tree = stack.enter_context(_tree(spec, workdir, version.label))
            version.python = _environment(version, workdir)
            _probe(version)
        common = [s for s in versions[1].sections if s in versions[0].sections]
        sections = [s for s in (args.only or common) if s in common and s not in args.skip]
        left = sorted(set(versions[0].sections) ^ set(versions[1].sections))
        print(
            f"[compare] before {versions[0].commit}, after {versions[1].commit}; sections: "
            + " ".join(sections)
            + (f" (in one version only: {' '.join(left)})" if left else ""),
            file=sys.stderr,
        )
        run_all(versions, sections, args.rounds, args.quick, args.out)


if __name__ == "__main__":
    main()
