"""The glue between a policy function and the componentize-py export."""

import pytest

from policy_host import ERROR_LIMIT, STOPPED, Policy, Service, bounded, export, to_wit


def declared(policy_fn, settings=None, facts=()):
    """What `Declare().declare` returns, with stand-in bindings."""
    return export(policy_fn)().declare(settings, list(facts))


def test_to_wit_converts_every_field(wit):
    policy = (
        Policy()
        .add(Service("web", enable=True, subscribe=["file#/etc/web.conf"]))
        .add(Service("ftpd", STOPPED, enable=False))
        .leave_out("db", "when role = db (this machine: web)")
    )
    assert to_wit(policy, wit) == wit.Declaration(
        services=[
            wit.Service("web", wit.Ensure.RUNNING, True, ["file#/etc/web.conf"]),
            wit.Service("ftpd", wit.Ensure.STOPPED, False, []),
        ],
        left_out=[wit.LeftOut("db", "when role = db (this machine: web)")],
    )


def test_declare_gives_the_policy_its_settings_and_facts(bindings):
    seen = {}

    def policy(ctx):
        seen["settings"] = ctx.settings
        seen["role"] = ctx.facts.label("role")
        return Policy().add(Service("web"))

    facts = [bindings.Fact("os.id", "debian"), bindings.Fact("role", "web")]
    result = declared(policy, '{"a": 1}', facts)
    assert seen == {"settings": '{"a": 1}', "role": "web"}
    assert result == bindings.Declaration([bindings.Service("web", bindings.Ensure.RUNNING, None, [])], [])


def test_an_exception_becomes_err_with_the_traceback(bindings):
    def failing_policy(ctx):
        raise RuntimeError("no web for you")

    with pytest.raises(bindings.Err) as error:
        declared(failing_policy)
    text = error.value.value
    assert text.startswith("Traceback (most recent call last):")
    assert "in failing_policy" in text
    assert text.rstrip().endswith("RuntimeError: no web for you")


def test_a_settings_error_becomes_err(bindings):
    with pytest.raises(bindings.Err, match="no settings given") as error:
        declared(lambda ctx: ctx.settings_json())
    assert "SettingsError" in error.value.value


def test_a_result_that_is_not_a_policy_becomes_err(bindings):
    def forgetful(ctx):
        Policy().add(Service("web"))

    with pytest.raises(bindings.Err) as error:
        declared(forgetful)
    assert "TypeError: forgetful returned NoneType, not a policy_host.Policy" in error.value.value


def test_a_long_traceback_is_bounded_keeping_its_end(bindings):
    def verbose_policy(ctx):
        raise ValueError("word " * 1000 + "the bottom")

    with pytest.raises(bindings.Err) as error:
        declared(verbose_policy)
    text = error.value.value
    head, rest = text.split("\n", 1)
    assert head.startswith("... (") and head.endswith(" characters not shown)")
    cut = int(head[len("... (") : -len(" characters not shown)")])
    assert cut > 0 and len(rest) == ERROR_LIMIT
    assert "Traceback (most recent call last)" not in rest, "the start is what is cut"
    assert rest.rstrip().endswith("the bottom")


def test_bounded_leaves_short_text_alone_and_counts_what_it_cuts():
    assert bounded("short") == "short"
    assert bounded("abcdef", limit=2) == "... (4 characters not shown)\nef"


def test_export_needs_a_function():
    with pytest.raises(TypeError, match="export takes the policy function"):
        export(Policy())
