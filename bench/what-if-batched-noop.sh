#!/bin/sh
# Not what the host does: a what-if for the benchmark's "where the time goes"
# table. The same information as systemctl-noop.sh (every unit's running and
# enabled state) from two systemctl processes instead of 1 + 2N: what a
# provider that batched its status queries could cost.
#
#   sh what-if-batched-noop.sh UNIT...
systemctl daemon-reload
systemctl show --property=Id,ActiveState,UnitFileState --system -- "$@" >/dev/null
exit 0
