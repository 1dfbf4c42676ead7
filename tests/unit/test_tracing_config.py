"""Reading the OpenTelemetry environment variables into a `TracingConfig`."""

from __future__ import annotations

import pytest

from jobqueue.adapters.telemetry.tracing_config import (
    Exporter,
    Sampler,
    TracingConfig,
    TracingConfigError,
)
from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings


def problems_of(environ: dict[str, str]) -> list[str]:
    with pytest.raises(TracingConfigError) as caught:
        TracingConfig.from_env(environ)
    return caught.value.problems


def test_tracing_is_off_without_variables() -> None:
    config = TracingConfig.from_env({})
    assert not config.enabled
    assert config == TracingConfig()


@pytest.mark.parametrize("value", ["none", "NONE", " none ", ""])
def test_exporter_none_or_empty_turns_tracing_off(value: str) -> None:
    assert not TracingConfig.from_env({"OTEL_TRACES_EXPORTER": value}).enabled


def test_sdk_disabled_wins_over_an_exporter() -> None:
    environ = {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}
    assert not TracingConfig.from_env(environ).enabled


def test_exporters_are_read_as_a_list_without_duplicates() -> None:
    config = TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp, console,otlp"})
    assert config.exporters == (Exporter.OTLP, Exporter.CONSOLE)


def test_unknown_exporter_is_refused_naming_the_variable() -> None:
    (problem,) = problems_of({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert problem.startswith("OTEL_TRACES_EXPORTER:")
    assert "'zipkin'" in problem
    assert "otlp, console or none" in problem


def test_none_combined_with_an_exporter_is_refused() -> None:
    (problem,) = problems_of({"OTEL_TRACES_EXPORTER": "none,otlp"})
    assert problem.startswith("OTEL_TRACES_EXPORTER:")


def test_otlp_endpoint_defaults_to_the_local_collector() -> None:
    config = TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp"})
    assert config.otlp_endpoint == "http://localhost:4318/v1/traces"


@pytest.mark.parametrize("base", ["http://collector:4318", "http://collector:4318/"])
def test_general_endpoint_gets_the_traces_path_appended(base: str) -> None:
    environ = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": base}
    assert TracingConfig.from_env(environ).otlp_endpoint == "http://collector:4318/v1/traces"


def test_traces_endpoint_is_used_as_given_and_wins() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://general:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example:443/custom",
    }
    assert TracingConfig.from_env(environ).otlp_endpoint == "https://traces.example:443/custom"


def test_endpoint_that_is_not_an_http_url_is_refused() -> None:
    environ = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}
    (problem,) = problems_of(environ)
    assert problem.startswith("OTEL_EXPORTER_OTLP_ENDPOINT:")


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
def test_grpc_is_refused_naming_the_variable_and_the_way_out(variable: str) -> None:
    (problem,) = problems_of({"OTEL_TRACES_EXPORTER": "otlp", variable: "grpc"})
    assert problem.startswith(f"{variable}: 'grpc'")
    assert "not installed" in problem
    assert "http/protobuf" in problem


def test_traces_protocol_overrides_the_general_one() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert TracingConfig.from_env(environ).exporters == (Exporter.OTLP,)


def test_http_json_and_unknown_protocols_are_refused() -> None:
    assert problems_of({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert problems_of({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier"})


def test_protocol_matters_only_to_the_otlp_exporter() -> None:
    # A platform may set grpc for its metrics and logs; traces off (or on the console)
    # must still start.
    for exporter in ("none", "console"):
        environ = {"OTEL_TRACES_EXPORTER": exporter, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        TracingConfig.from_env(environ)


def test_other_variables_are_not_read_while_tracing_is_off() -> None:
    environ = {"OTEL_TRACES_SAMPLER": "bogus", "OTEL_RESOURCE_ATTRIBUTES": "no-equals-sign"}
    assert TracingConfig.from_env(environ) == TracingConfig()


def test_sampler_and_ratio_are_read() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_TRACES_SAMPLER": "ParentBased_TraceIdRatio",
        "OTEL_TRACES_SAMPLER_ARG": "0.25",
    }
    config = TracingConfig.from_env(environ)
    assert (config.sampler, config.sampler_ratio) == (Sampler.PARENT_BASED_TRACE_ID_RATIO, 0.25)


def test_default_sampler_follows_the_parent_and_samples_roots() -> None:
    config = TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert config.sampler is Sampler.PARENT_BASED_ALWAYS_ON


def test_ratio_is_ignored_by_samplers_that_take_none() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_TRACES_SAMPLER_ARG": "not a number",
    }
    assert TracingConfig.from_env(environ).sampler is Sampler.ALWAYS_ON


@pytest.mark.parametrize("ratio", ["1.5", "-0.1", "nan", "half"])
def test_ratio_outside_zero_to_one_is_refused(ratio: str) -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_TRACES_SAMPLER": "traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": ratio,
    }
    (problem,) = problems_of(environ)
    assert problem.startswith("OTEL_TRACES_SAMPLER_ARG:")


def test_unsupported_sampler_is_refused() -> None:
    environ = {"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "jaeger_remote"}
    (problem,) = problems_of(environ)
    assert problem.startswith("OTEL_TRACES_SAMPLER: 'jaeger_remote'")


def test_service_name_and_resource_attributes_are_read() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_SERVICE_NAME": "billing-jobs",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod, team=a%20b%2Cc,,",
    }
    config = TracingConfig.from_env(environ)
    assert config.service_name == "billing-jobs"
    assert config.resource_attributes == (("deployment.environment", "prod"), ("team", "a b,c"))


def test_resource_attribute_without_a_value_separator_is_refused() -> None:
    environ = {"OTEL_TRACES_EXPORTER": "console", "OTEL_RESOURCE_ATTRIBUTES": "a=1,oops"}
    (problem,) = problems_of(environ)
    assert problem.startswith("OTEL_RESOURCE_ATTRIBUTES: entry 2 ('oops')")


def test_batch_processor_settings_are_read() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_BSP_EXPORT_TIMEOUT": "2000",
        "OTEL_BSP_MAX_QUEUE_SIZE": "64",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "32",
    }
    config = TracingConfig.from_env(environ)
    assert (
        config.schedule_delay_ms,
        config.export_timeout_ms,
        config.max_queue_size,
        config.max_export_batch_size,
    ) == (100, 2000, 64, 32)


def test_batch_larger_than_the_queue_is_refused() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_BSP_MAX_QUEUE_SIZE": "10",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20",
    }
    (problem,) = problems_of(environ)
    assert problem.startswith("OTEL_BSP_MAX_EXPORT_BATCH_SIZE:")


def test_every_problem_is_reported_at_once() -> None:
    environ = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_TRACES_SAMPLER": "sometimes",
        "OTEL_BSP_SCHEDULE_DELAY": "soon",
    }
    named = [problem.split(":", 1)[0] for problem in problems_of(environ)]
    assert named == [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_TRACES_SAMPLER",
        "OTEL_BSP_SCHEDULE_DELAY",
    ]


def test_settings_report_tracing_problems_with_the_others() -> None:
    environ = {
        "WORKERS": "0",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(environ)
    named = [problem.split(":", 1)[0] for problem in caught.value.problems]
    assert named == ["OTEL_EXPORTER_OTLP_PROTOCOL", "WORKERS"]


def test_settings_carry_the_tracing_config() -> None:
    settings = Settings.from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert settings.tracing.exporters == (Exporter.CONSOLE,)
    assert not Settings.from_env({}).tracing.enabled
