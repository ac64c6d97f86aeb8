"""MkDocs hook: the reference pages and the performance chart, drawn from the code at build time.

A page holds a marker such as `<!-- reference: settings -->` where a generated part
goes; nothing generated is committed, so the reference cannot drift from the code:
- settings: the daemon's parser and its table of settings (flag, variable, key, default);
- cli: every command of `signin-broker`, from the parser completion and the man page use;
- api: every RPC, message and enum of broker.proto, with the comments written there (from
  the broker.protoset the package's build writes: no protobuf compiler needed);
- statuses: the CLI's exit statuses, each refusal's gRPC status, each status's HTTP one;
- chart: a benchmark's printed table (committed as the benchmark printed it) as an SVG;
- output: such a file as it was printed.

tests/unit/test_docs.py checks each part names everything the code has.
"""

from __future__ import annotations

import argparse
import html
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!-- (reference|chart|output): ([\w./-]+) -->")
# The defaults that depend on the person are computed in folders made for the purpose,
# then shown as a person reads them: the build machine's own paths never reach the page.
AS_READ = {"HOME": "~", "XDG_RUNTIME_DIR": "$XDG_RUNTIME_DIR"}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs' event: fill in every marker of the page."""
    return fill(markdown)


def fill(markdown: str) -> str:
    """The page with each marker replaced by what it names."""

    def replace(match: re.Match[str]) -> str:
        kind, name = match.groups()
        if kind == "chart":
            return benchmark_chart((ROOT / "docs" / name).read_text())
        if kind == "output":
            return "```text\n" + (ROOT / "docs" / name).read_text().rstrip() + "\n```\n"
        return REFERENCES[name]()

    return MARKER.sub(replace, markdown)


def cell(text: object) -> str:
    """Text made safe for one cell of a Markdown table (as it is, in a code span)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


CODE_SPAN = re.compile(r"(`+).+?\1")


def prose(text: object) -> str:
    """Words from the code (help, comments, docstrings) as one cell or line of a page.

    Markdown passes `<alias>` or `map<string, string>` to the browser as a tag, which
    it swallows: outside code spans, `<`, `>` and `&` are written as entities; a code
    span shows its text as it is.
    """
    text, shown, start = cell(text), [], 0
    for span in CODE_SPAN.finditer(text):
        shown += [html.escape(text[start : span.start()], quote=False), span.group()]
        start = span.end()
    return "".join([*shown, html.escape(text[start:], quote=False)])


def code(text: object) -> str:
    return f"`{text}`" if str(text) else ""


# -- settings -----------------------------------------------------------------------------


@contextmanager
def documented_environment() -> Iterator[dict[str, str]]:
    """A home and a private run folder of their own, each with the text that stands for it."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith(("XDG_", "SIGNIN_BROKER_")):
            del os.environ[name]
    with tempfile.TemporaryDirectory() as folder:
        shown = {}
        for name, text in AS_READ.items():
            path = Path(folder, name.lower())
            path.mkdir(mode=0o700)
            os.environ[name] = str(path)
            shown[str(path)] = text
        try:
            yield shown
        finally:
            os.environ.clear()
            os.environ.update(saved)


def as_read(value: object, shown: dict[str, str]) -> str:
    """A default with the made-up folders written as a person reads them."""
    text = str(value)
    for path, stands_for in shown.items():
        text = text.replace(path, stands_for)
    return text


def settings_reference() -> str:
    from signin_broker.daemon.options import OPTIONS, PROVIDER_KEYS, env_name
    from signin_broker.daemon.settings import argument_parser

    flags = {
        action.dest: action.option_strings[-1]
        for action in argument_parser()._actions
        if action.option_strings
    }
    rows = [
        "| key | flag | environment variable | default | meaning |",
        "|---|---|---|---|---|",
    ]
    with documented_environment() as shown:
        for option in OPTIONS:
            default = option.default()
            default = "" if isinstance(default, dict) else as_read(default, shown)
            where = " Also per provider." if option.name in PROVIDER_KEYS else ""
            rows.append(
                f"| `{option.name}` | `{flags[option.name]} {option.metavar}` "
                f"| `{env_name(option.name)}` | {code(cell(default)) or 'none'} "
                f"| {prose(option.help)}.{where} |"
            )
    others = [
        f"- `{', '.join(action.option_strings)}`: {prose(action.help)}"
        for action in argument_parser()._actions
        if action.option_strings and action.dest not in {o.name for o in OPTIONS}
    ]
    return "\n".join(rows) + "\n\nThe daemon's other flags:\n\n" + "\n".join(others) + "\n"


# -- the command line ---------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


def _options_table(parser: argparse.ArgumentParser) -> str:
    rows = ["| option | meaning |", "|---|---|"]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            spelled = ", ".join(action.option_strings)
            if action.nargs != 0:
                spelled += f" {action.metavar or action.dest.upper()}"
        else:
            spelled = str(action.metavar or action.dest)
        if action.choices and not isinstance(action.choices, dict):
            spelled += " {" + ",".join(map(str, action.choices)) + "}"
        rows.append(f"| `{cell(spelled)}` | {prose(action.help or '')} |")
    return "\n".join(rows) if len(rows) > 2 else ""


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
    return f"```text\n{usage}\n```"


def cli_reference() -> str:
    from signin_broker.cli.table import full_parser

    top = full_parser()
    top.prog = "signin-broker"
    parts = [
        "## Global options",
        "",
        "They go before the command or after it (`signin-broker status --socket PATH`).",
        "",
        _options_table(top),
    ]
    for name, parser in _subparsers(top).items():
        parts += ["", f"## `signin-broker {name}`", "", prose(_help_of(top, name)), ""]
        parts += [_usage(parser), "", _options_table(parser)]
        for sub_name, sub in _subparsers(parser).items():
            parts += ["", f"### `signin-broker {name} {sub_name}`", ""]
            parts += [prose(_help_of(parser, sub_name)), "", _usage(sub), "", _options_table(sub)]
    return "\n".join(parts) + "\n"


# -- the API ------------------------------------------------------------------------------

TYPE_NAMES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 8: "bool", 9: "string",
    12: "bytes", 13: "uint32", 17: "sint32", 18: "sint64",
}  # fmt: skip


def _descriptor_set() -> Any:
    """broker.proto as protoc compiled it with its comments, from the installed package.

    The package's build writes broker.protoset (hatch_build.py) with protoc's source
    info, so the site needs no protobuf compiler: `pip install '.[docs]'` is enough.
    """
    from importlib.resources import files

    from google.protobuf import descriptor_pb2

    shipped = files("signin_broker.v1") / "broker.protoset"
    if not shipped.is_file():
        raise RuntimeError(
            f"{shipped} is missing: install the package again (pip install -e .), whose build"
            " writes it"
        )
    return descriptor_pb2.FileDescriptorSet.FromString(shipped.read_bytes()).file[0]


def _comments(proto_file: Any) -> dict[tuple[int, ...], str]:
    return {
        tuple(location.path): " ".join(location.leading_comments.split())
        for location in proto_file.source_code_info.location
        if location.leading_comments
    }


def _type_of(field: Any, maps: dict[str, str], documented: set[str]) -> str:
    if field.type_name in maps:
        return maps[field.type_name]
    name = field.type_name.rsplit(".", 1)[-1] if field.type_name else TYPE_NAMES[field.type]
    shown = f"[{name}](#{name.lower()})" if name in documented else name
    return f"repeated {shown}" if field.label == 3 else shown


def _maps(proto: Any) -> dict[str, str]:
    """Each map field's synthetic entry type, by its full name, as `map<K, V>`."""
    maps = {}
    for message in proto.message_type:
        for nested in message.nested_type:
            if nested.options.map_entry:
                key, value = (_type_of(f, {}, set()) for f in nested.field)
                entry = f".{proto.package}.{message.name}.{nested.name}"
                maps[entry] = prose(f"map<{key}, {value}>")
    return maps


def api_reference() -> str:
    proto = _descriptor_set()
    comments = _comments(proto)
    maps = _maps(proto)
    documented = {m.name for m in proto.message_type} | {e.name for e in proto.enum_type}
    parts = []
    for s, service in enumerate(proto.service):
        parts += [f"## Service `{proto.package}.{service.name}`", ""]
        parts += [prose(comments.get((6, s), "")), ""]
        parts += ["| RPC | request | response | what it does |", "|---|---|---|---|"]
        for m, method in enumerate(service.method):
            request = method.input_type.rsplit(".", 1)[-1]
            response = method.output_type.rsplit(".", 1)[-1]
            stream = "stream " if method.server_streaming else ""
            meaning = prose(comments.get((6, s, 2, m), ""))
            parts.append(
                f"| `{method.name}` | [{request}](#{request.lower()}) "
                f"| {stream}[{response}](#{response.lower()}) | {meaning} |"
            )
    parts += ["", "## Messages"]
    for i, message in enumerate(proto.message_type):
        parts += ["", f"### {message.name}", "", prose(comments.get((4, i), ""))]
        if message.field:
            parts += ["", "| field | type | meaning |", "|---|---|---|"]
            for f, field in enumerate(message.field):
                meaning = prose(comments.get((4, i, 2, f), ""))
                shown = _type_of(field, maps, documented)
                parts.append(f"| `{field.name}` | {shown} | {meaning} |")
    parts += ["", "## Enums"]
    for e, enum in enumerate(proto.enum_type):
        parts += ["", f"### {enum.name}", "", prose(comments.get((5, e), ""))]
        parts += ["", "| value | number | meaning |", "|---|---|---|"]
        for v, value in enumerate(enum.value):
            meaning = prose(comments.get((5, e, 2, v), ""))
            parts.append(f"| `{value.name}` | {value.number} | {meaning} |")
    return "\n".join(parts) + "\n"


# -- exit and call statuses ---------------------------------------------------------------

EXIT_MEANINGS = {
    "EXIT_FAILED": "the daemon refused or failed; its reason is on stderr",
    "EXIT_USAGE": "a usage error (an unknown option, a missing argument)",
    "EXIT_DAEMON_NOT_RUNNING": "the daemon is not running; stderr says how to start it",
    "EXIT_NOT_SIGNED_IN": "no account is signed in for the request; stderr says how to sign in",
}


def exit_statuses() -> dict[str, int]:
    from signin_broker.cli import _failures

    return {name: getattr(_failures, name) for name in dir(_failures) if name.startswith("EXIT_")}


def statuses_reference() -> str:
    from grpclib.const import Status

    from signin_broker.daemon.api import json_calls, statuses

    rows = ["| status | name | meaning |", "|---|---|---|", "| 0 | | success |"]
    for name, value in sorted(exit_statuses().items(), key=lambda item: item[1]):
        rows.append(f"| {value} | `{name}` | {prose(EXIT_MEANINGS.get(name, ''))} |")
    rows += ["", "## Refusals and their gRPC status", ""]
    rows += ["| refusal | gRPC status | when |", "|---|---|---|"]
    for refusal, status in statuses._STATUS_OF.items():
        doc = " ".join((refusal.__doc__ or "").split("\n\n")[0].split())
        rows.append(f"| `{refusal.__name__}` | `{status.name}` | {prose(doc)} |")
    rows.append(
        '| anything unexpected | `INTERNAL` | the message is "internal"; details go to the log |'
    )
    rows += ["", "## gRPC statuses as HTTP statuses (the JSON calls)", ""]
    rows += ["| gRPC status | HTTP status |", "|---|---|"]
    for status in Status:
        rows.append(f"| `{status.name}` | {json_calls.HTTP_STATUS.get(status, 500)} |")
    return "\n".join(rows) + "\n"


# -- the performance chart ----------------------------------------------------------------

# name, the yardstick's figure, the broker's, their ratio ("1.39x"), the target (bench_api.row)
BAR_ROW = re.compile(
    r"^(?P<name>.*?)\s+(?P<bare>[\d,.]+)\s+(?P<broker>[\d,.]+)"
    r"\s+(?P<ratio>[\d.]+)x  (?P<target>.*)$"
)


def benchmark_rows(printed: str) -> list[tuple[str, float, str]]:
    """The rows of bench_api.py's table that compare the broker with a yardstick."""
    rows = []
    for line in printed.splitlines():
        match = BAR_ROW.match(line)
        if match:
            rows.append((match["name"], float(match["ratio"]), match["target"].strip()))
    return rows


def benchmark_chart(printed: str) -> str:
    """Each ratio to its yardstick as a bar, its target as a tick; an inline SVG."""
    rows = benchmark_rows(printed)
    width, label_width, row_height = 760, 330, 26
    scale_max = max(3.0, math.ceil(max((ratio for _, ratio, _ in rows), default=0) * 2) / 2)
    plot = width - label_width - 60
    height = row_height * len(rows) + 40

    def x(ratio: float) -> float:
        return label_width + plot * min(ratio, scale_max) / scale_max

    shapes = [
        '<div class="benchmark-chart">'
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="benchmark ratios" font-family="sans-serif" font-size="12">'
    ]
    for tick in (step / 2 for step in range(1, int(scale_max * 2) + 1)):
        shapes.append(
            f'<line x1="{x(tick):.1f}" y1="10" x2="{x(tick):.1f}" y2="{height - 25}" '
            f'stroke="#ccc" stroke-dasharray="{"" if tick == 1.0 else "2,3"}"/>'
            f'<text x="{x(tick):.1f}" y="{height - 10}" text-anchor="middle">{tick:g}x</text>'
        )
    for i, (name, ratio, target) in enumerate(rows):
        top = 12 + i * row_height
        goal = re.search(r"([<>]=)\s*([\d.]+)x", target)
        met = goal is None or (
            ratio <= float(goal[2]) if goal[1] == "<=" else ratio >= float(goal[2])
        )
        colour = "#9e9e9e" if goal is None else "#2e7d32" if met else "#c62828"
        label = html.escape(name.replace("`", ""))
        shapes.append(
            f'<text x="{label_width - 8}" y="{top + 15}" text-anchor="end">{label}'
            f"</text>"
            f'<rect x="{label_width}" y="{top + 3}" width="{x(ratio) - label_width:.1f}" '
            f'height="{row_height - 8}" fill="{colour}"/>'
            f'<text x="{x(ratio) + 4:.1f}" y="{top + 15}">{ratio:.2f}x</text>'
        )
        if goal:
            shapes.append(
                f'<line x1="{x(float(goal[2])):.1f}" y1="{top}" x2="{x(float(goal[2])):.1f}" '
                f'y2="{top + row_height - 2}" stroke="#000" stroke-width="2">'
                f"<title>target {html.escape(target)}</title></line>"
            )
    shapes.append("</svg></div>")  # a block of raw HTML to Markdown, left as it is
    return "".join(shapes) + "\n"


REFERENCES: dict[str, Callable[[], str]] = {
    "settings": settings_reference,
    "cli": cli_reference,
    "api": api_reference,
    "statuses": statuses_reference,
}


if __name__ == "__main__":  # print one part: python scripts/docs_hooks.py settings
    sys.stdout.write(REFERENCES[sys.argv[1]]())
