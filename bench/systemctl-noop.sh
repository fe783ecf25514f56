#!/bin/sh
# The benchmark's baseline for a run with nothing to do: exactly the systemctl
# calls `host run` makes on a converged machine, without the host. One
# daemon-reload, then `is-active` and `is-enabled` of each unit, in the same
# order and with the same arguments.
#
#   sh systemctl-noop.sh UNIT...
systemctl daemon-reload
for unit in "$@"; do
    systemctl is-active --system -- "$unit" >/dev/null
    systemctl is-enabled --system -- "$unit" >/dev/null
done
exit 0
