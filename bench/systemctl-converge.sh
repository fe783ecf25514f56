#!/bin/sh
# The benchmark's baseline for a converging run: exactly the systemctl calls
# `host run` makes when every unit is stopped and disabled and the policy wants
# it running and enabled, without the host. One daemon-reload, then for each
# unit: its status (is-active, is-enabled), start, enable, and the status again
# (the policy verifies the state it reached).
#
#   sh systemctl-converge.sh UNIT...
systemctl daemon-reload
for unit in "$@"; do
    systemctl is-active --system -- "$unit" >/dev/null
    systemctl is-enabled --system -- "$unit" >/dev/null
    systemctl start --system -- "$unit"
    systemctl enable --system -- "$unit"
    systemctl is-active --system -- "$unit" >/dev/null
    systemctl is-enabled --system -- "$unit" >/dev/null
done
exit 0
