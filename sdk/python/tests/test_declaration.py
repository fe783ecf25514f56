"""Services, left-out services and the policy that holds them."""

import dataclasses

import pytest

from policy_host import RUNNING, STOPPED, LeftOut, Policy, Service


def test_service_defaults_to_running_with_boot_setting_left_alone():
    service = Service("web")
    assert (service.ensure, service.enable, service.subscribe) == (RUNNING, None, ())


def test_service_keeps_subscriptions_as_a_tuple_and_is_frozen():
    subscribe = ["file#/etc/web.conf"]
    service = Service("web", subscribe=subscribe)
    subscribe.append("package#web")
    assert service.subscribe == ("file#/etc/web.conf",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        service.ensure = STOPPED


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": 7}, "name must be a str, not int"),
        ({"name": "web", "ensure": "started"}, "ensure must be 'running' or 'stopped', not 'started'"),
        ({"name": "web", "enable": "yes"}, "enable must be True, False or None, not 'yes'"),
        ({"name": "web", "enable": 1}, "enable must be True, False or None, not 1"),
        ({"name": "web", "subscribe": "file#/etc/web.conf"}, "subscribe must be a list of str, not str"),
        ({"name": "web", "subscribe": ["package#web", 3]}, "subscribe entry must be a str, not int"),
    ],
)
def test_service_refuses_a_bad_field_naming_it(kwargs, field):
    with pytest.raises(ValueError) as error:
        Service(**kwargs)
    assert field in str(error.value)


def test_service_does_not_check_names_the_engine_checks():
    # The engine owns name and subscription rules; the SDK must not drift.
    assert Service("not a unit!", subscribe=["nonsense"]).name == "not a unit!"


def test_policy_keeps_declaration_order_and_chains():
    policy = Policy().add(Service("b")).add(Service("a", STOPPED))
    returned = policy.leave_out("httpd", "when role = web (this machine: db)")
    assert returned is policy
    assert [s.name for s in policy.services] == ["b", "a"]
    assert policy.left_out == [LeftOut("httpd", "when role = web (this machine: db)")]


def test_policy_lists_are_copies():
    policy = Policy().add(Service("web"))
    policy.services.clear()
    assert len(policy.services) == 1


def test_policy_refuses_what_is_not_a_service():
    with pytest.raises(TypeError, match="Policy.add takes a Service, not str"):
        Policy().add("web")


def test_left_out_needs_text():
    with pytest.raises(ValueError, match="why must be a str"):
        Policy().leave_out("httpd", None)
