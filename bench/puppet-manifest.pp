# The benchmark's units managed by Puppet to the state the policy wants:
# running and enabled, with the systemd provider. The bench replaces @UNITS@
# with the quoted unit names ('bench-001', 'bench-002', ...) and runs, inside
# the sandbox:
#
#   puppet apply --detailed-exitcodes manifest.pp
$units = [@UNITS@]

service { $units:
  ensure   => running,
  enable   => true,
  provider => systemd,
}
