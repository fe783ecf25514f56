"""The Python example (policies/example-python), through the export glue,
as the engine would ask it."""

import pytest

from app import Declare


def declare(bindings, settings=None, **facts):
    return Declare().declare(settings, [bindings.Fact(k, v) for k, v in facts.items()])


def test_declares_the_same_services_as_the_rust_example(bindings):
    Service, Ensure = bindings.Service, bindings.Ensure
    assert declare(bindings, hostname="web1") == bindings.Declaration(
        services=[
            Service(
                "httpd",
                Ensure.RUNNING,
                True,
                ["file#/etc/httpd/conf/httpd.conf", "package#httpd"],
            ),
            Service("legacy-ftpd", Ensure.STOPPED, False, []),
            Service("metrics-agent", Ensure.RUNNING, None, []),
        ],
        left_out=[],
    )


def test_leaves_httpd_out_on_a_db_machine(bindings):
    declaration = declare(bindings, role="db")
    assert [s.name for s in declaration.services] == ["legacy-ftpd", "metrics-agent"]
    assert declaration.left_out == [bindings.LeftOut("httpd", "when role = web (this machine: db)")]


def test_settings_declare_extra_services_running(bindings):
    declaration = declare(bindings, '{"extra": ["cron", "backup.timer"]}')
    assert [(s.name, s.ensure, s.enable) for s in declaration.services[3:]] == [
        ("cron", bindings.Ensure.RUNNING, None),
        ("backup.timer", bindings.Ensure.RUNNING, None),
    ]


def test_bad_settings_are_the_policys_error(bindings):
    with pytest.raises(bindings.Err) as error:
        declare(bindings, '{"extra": ["cron"')
    assert "settings: not valid JSON at line 1 column 18" in error.value.value
    assert "in extra_services" in error.value.value
