# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_policy_host_global_optspecs
    string join \n log-format= log-level= h/help V/version
end

function __fish_policy_host_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_policy_host_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_policy_host_using_subcommand
    set -l cmd (__fish_policy_host_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c policy-host -n "__fish_policy_host_needs_command" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_needs_command" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_needs_command" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_needs_command" -s V -l version -d 'Print version'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "run" -d 'Apply a policy to this machine (or show what would change, with --noop)'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "watch" -d 'Keep applying policies: one full run, then a run of the policies concerned whenever a unit, file or document they depend on changes (until SIGTERM). Takes the policies and settings `run` takes; it prints no report (a line per resource changed or failed) and --refresh counts for its first run only. Root only; only systemd wakes it'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "pause" -d 'Leave units alone (all of them, when none is named): timer and watch runs refuse their changes and say "paused" until `policy-host resume` or the time given. Root only'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "resume" -d 'End pauses (all of them, when no unit is named): the next run repairs the units'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "keygen" -d 'Generate a minisign key pair for signing policies'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "sign" -d 'Sign a policy: writes POLICY.wasm.minisig beside it'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "status" -d 'Show units as the host reads them (is-active and is-enabled words), over D-Bus or systemctl'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "facts" -d 'Show what policies are told about this machine: the facts the host gathers (host name, OS, architecture, CPUs, memory, versions), then the labels host.toml gives it'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "push" -d 'Push a signed policy or settings document to an OCI registry, with its signature'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "verify" -d 'Check a policy\'s signature against trusted keys (exit 0 valid; 1 invalid, or valid but refused by this machine\'s rollback record: older than what it accepted, or undated)'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "compile" -d 'Compile signed policies into the compile cache now (each signature checked first), so that no run pays a cold compile: worth it for large policies (Python, JavaScript)'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "compose" -d 'Make one policy of a declaration (a Python or JavaScript policy\'s component) and the engine that applies it: the component model\'s composition. Sign the result'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "new-policy" -d 'Create a new policy crate: a policy with one service, a native test, a build command'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "inspect" -d 'Show a policy\'s size, SHA-256, world, imports and exports, and signature'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "man" -d 'Print the man page (roff), generated from this command line; with --out-dir, write one page per subcommand too'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "config-template" -d 'Print a host.toml with every setting, commented and explained (the packaged default)'
complete -c policy-host -n "__fish_policy_host_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l settings -d 'A settings document passed to the policies named (for the manifest policy: the manifest), a file or an oci:// reference. It is the desired state as much as the policy is: it must be signed like a policy, under its own file name' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l refresh -d 'A resource that changed outside the policy (TYPE#NAME, e.g. file#/etc/httpd/conf/httpd.conf); services subscribed to it are restarted. Repeatable' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l trusted-key -d 'A trusted public key file (minisign format). Repeatable. When none is given, every *.pub file in --trusted-keys-dir is trusted' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l trusted-keys-dir -d 'The system directory of trusted *.pub keys, used when no --trusted-key is given [default: /etc/policy-host/trusted-keys]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l systemctl-timeout -d 'The longest one exchange with systemd (a systemctl command, a D-Bus call) may take, and a start, stop or restart job from its submission to its end, in seconds [default: 90]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l allow-unit -d 'Only let policies touch units matching this glob (e.g. \'web-*\', \'nginx.service\'); repeatable, adds to the configuration file\'s; other units are denied' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l provider -d 'How systemd is asked: auto (over D-Bus when the system bus and systemd on it answer: status, jobs on systemd\'s job engine, unit files; else with systemctl) or systemctl (always the design\'s systemctl commands, one job at a time) [default: auto]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l state-dir -d 'Where the host keeps what it must remember between runs (root-only): the newest signed version of each policy and settings file accepted, for rollback protection (versions.json), and what each service\'s file# and package# subscriptions last saw (subscriptions.json) [default: /var/lib/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l report -d 'Also write the JSON report to FILE, atomically (the last run\'s report); in host.toml, manual runs write it too, so monitoring sees them' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l metrics -d 'Write Prometheus metrics to FILE, atomically (for node_exporter\'s textfile collector; a missing directory is created, 0755)' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l cpu-time -d 'Guest CPU time per run, in seconds (host calls excluded) [default: 10]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l memory-limit -d 'Guest memory, in MiB [default: 64]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l call-budget -d 'Provider calls per run [default: 10000]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l log-limit -d 'Captured policy stdout and stderr, in bytes [default: 1048576]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l report-limit -d 'Text in the policy\'s report, in bytes [default: 1048576]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l wall-clock -d 'The whole run, host calls included, in seconds [default: 900]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l lock-file -d 'The lock file that keeps two runs on this machine from interleaving; its directory must be root\'s alone (created 0700 when missing) [default: /run/policy-host/lock]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l lock-timeout -d 'How long to wait for another run to release the lock, in seconds [default: 600]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l watch-path -d 'A directory below which file# subscriptions are read (never /proc, /sys, /dev or /run); repeatable, adds to the configuration file\'s; without any, /etc, /opt, /srv and /usr. The packaged units hide /home, /root and /tmp from the host (ProtectHome=, PrivateTmp=): a file there is never read or watched by them [default: /etc,/opt,/srv,/usr]' -r -f -a "(__fish_complete_directories)"
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l jobs -d 'How many start, stop and restart jobs of a run may be pending at once on systemd\'s job engine (over D-Bus); 1 waits for each job before the next call, as systemctl does [default: 64]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l settle -d 'How long a unit must stay up after its start or restart job ended for the start to count (same invocation, no automatic restart), in seconds; units started side by side settle side by side; 0 turns it off [default: 1]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l cache-dir -d 'Where compiled policies are cached (root-only; unsafe entries are ignored and rebuilt) [default: /var/cache/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l registry-ca -d 'A PEM file of certificate authorities trusted for registries, besides the system\'s' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l insecure-registry -d 'A registry spoken to over plain HTTP, without TLS (a test or an isolated network only); repeatable, adds to the configuration file\'s' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l registry-auth -d 'The Docker config.json holding registry logins (its "auths" entries, as `docker login` writes them); without it, $DOCKER_CONFIG/config.json, else /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l registry-timeout -d 'The longest one registry request may take, in seconds (never past the run\'s wall clock) [default: 30]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l noop -d 'Query only: show what would change, change nothing'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l allow-unsigned -d 'Run a policy and settings without a valid signature (development only): prints a warning and records `signature.verified: false` in the report'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l allow-rollback -d 'Run a policy or settings signed earlier than the version already accepted on this machine (rollback protection; see --state-dir)'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l no-wait -d 'Fail at once when another run holds the lock'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l no-cache -d 'Compile the policy every time; neither read nor write the cache'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l json -d 'Print the report as one JSON document'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -s v -l verbose -d 'List every provider call with its duration'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -s q -l quiet -d 'Print only failures'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -l detailed-exitcodes -d 'Exit 0 when nothing changed, 2 on changes, 4 on failures, 6 on both (1: the run could not happen)'
complete -c policy-host -n "__fish_policy_host_using_subcommand run" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l settings -d 'A settings document passed to the policies named (for the manifest policy: the manifest), a file or an oci:// reference. It is the desired state as much as the policy is: it must be signed like a policy, under its own file name' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l trusted-key -d 'A trusted public key file (minisign format). Repeatable. When none is given, every *.pub file in --trusted-keys-dir is trusted' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l trusted-keys-dir -d 'The system directory of trusted *.pub keys, used when no --trusted-key is given [default: /etc/policy-host/trusted-keys]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l systemctl-timeout -d 'The longest one exchange with systemd (a systemctl command, a D-Bus call) may take, and a start, stop or restart job from its submission to its end, in seconds [default: 90]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l allow-unit -d 'Only let policies touch units matching this glob (e.g. \'web-*\', \'nginx.service\'); repeatable, adds to the configuration file\'s; other units are denied' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l provider -d 'How systemd is asked: auto (over D-Bus when the system bus and systemd on it answer: status, jobs on systemd\'s job engine, unit files; else with systemctl) or systemctl (always the design\'s systemctl commands, one job at a time) [default: auto]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l state-dir -d 'Where the host keeps what it must remember between runs (root-only): the newest signed version of each policy and settings file accepted, for rollback protection (versions.json), and what each service\'s file# and package# subscriptions last saw (subscriptions.json) [default: /var/lib/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l report -d 'Also write the JSON report to FILE, atomically (the last run\'s report); in host.toml, manual runs write it too, so monitoring sees them' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l metrics -d 'Write Prometheus metrics to FILE, atomically (for node_exporter\'s textfile collector; a missing directory is created, 0755)' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l cpu-time -d 'Guest CPU time per run, in seconds (host calls excluded) [default: 10]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l memory-limit -d 'Guest memory, in MiB [default: 64]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l call-budget -d 'Provider calls per run [default: 10000]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l log-limit -d 'Captured policy stdout and stderr, in bytes [default: 1048576]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l report-limit -d 'Text in the policy\'s report, in bytes [default: 1048576]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l wall-clock -d 'The whole run, host calls included, in seconds [default: 900]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l lock-file -d 'The lock file that keeps two runs on this machine from interleaving; its directory must be root\'s alone (created 0700 when missing) [default: /run/policy-host/lock]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l lock-timeout -d 'How long to wait for another run to release the lock, in seconds [default: 600]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l watch-path -d 'A directory below which file# subscriptions are read (never /proc, /sys, /dev or /run); repeatable, adds to the configuration file\'s; without any, /etc, /opt, /srv and /usr. The packaged units hide /home, /root and /tmp from the host (ProtectHome=, PrivateTmp=): a file there is never read or watched by them [default: /etc,/opt,/srv,/usr]' -r -f -a "(__fish_complete_directories)"
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l jobs -d 'How many start, stop and restart jobs of a run may be pending at once on systemd\'s job engine (over D-Bus); 1 waits for each job before the next call, as systemctl does [default: 64]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l settle -d 'How long a unit must stay up after its start or restart job ended for the start to count (same invocation, no automatic restart), in seconds; units started side by side settle side by side; 0 turns it off [default: 1]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l cache-dir -d 'Where compiled policies are cached (root-only; unsafe entries are ignored and rebuilt) [default: /var/cache/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l registry-ca -d 'A PEM file of certificate authorities trusted for registries, besides the system\'s' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l insecure-registry -d 'A registry spoken to over plain HTTP, without TLS (a test or an isolated network only); repeatable, adds to the configuration file\'s' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l registry-auth -d 'The Docker config.json holding registry logins (its "auths" entries, as `docker login` writes them); without it, $DOCKER_CONFIG/config.json, else /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l registry-timeout -d 'The longest one registry request may take, in seconds (never past the run\'s wall clock) [default: 30]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l resync -d 'How often a watch makes a full run whatever happened, give or take a tenth (it also pulls oci:// sources and checks what could not be watched), in seconds [default: 900]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l debounce -d 'How long a watch gathers file events after the first one before it runs (the events within it make one run; a unit\'s signal runs at once), in seconds [default: 0.1]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l refresh -d 'A resource that changed outside the policy (TYPE#NAME, e.g. file#/etc/httpd/conf/httpd.conf): services subscribed to it are restarted by the watch\'s first run only; later runs restart subscribers when the host sees their references change. Repeatable' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l noop -d 'Query only: show what would change, change nothing'
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l allow-unsigned -d 'Run a policy and settings without a valid signature (development only): prints a warning and records `signature.verified: false` in the report'
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l allow-rollback -d 'Run a policy or settings signed earlier than the version already accepted on this machine (rollback protection; see --state-dir)'
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l no-wait -d 'Fail at once when another run holds the lock'
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -l no-cache -d 'Compile the policy every time; neither read nor write the cache'
complete -c policy-host -n "__fish_policy_host_using_subcommand watch" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand pause" -l for -d 'How long the pause lasts (30s, 10m, 2h, 1day) [default: until `policy-host resume`]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand pause" -l state-dir -d 'Where the host keeps what it must remember between runs (root-only): the newest signed version of each policy and settings file accepted, for rollback protection (versions.json), and what each service\'s file# and package# subscriptions last saw (subscriptions.json) [default: /var/lib/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand pause" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand pause" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand pause" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand pause" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand resume" -l state-dir -d 'Where the host keeps what it must remember between runs (root-only): the newest signed version of each policy and settings file accepted, for rollback protection (versions.json), and what each service\'s file# and package# subscriptions last saw (subscriptions.json) [default: /var/lib/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand resume" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand resume" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand resume" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand resume" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand keygen" -l out -d 'Directory to write policy-host.pub and policy-host.key (mode 0600) into' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand keygen" -l password-file -d 'Read the password protecting the secret key from the first line of FILE (otherwise it is asked for on the terminal)' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand keygen" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand keygen" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand keygen" -l unencrypted -d 'Store the secret key without a password, for automation. Keep it safe by other means'
complete -c policy-host -n "__fish_policy_host_using_subcommand keygen" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand sign" -l key -d 'The secret key file (from `policy-host keygen` or `minisign -G`)' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand sign" -l password-file -d 'Read the secret key\'s password from the first line of FILE' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand sign" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand sign" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand sign" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -l systemctl-timeout -d 'The longest one exchange with systemd (a systemctl command, a D-Bus call) may take, and a start, stop or restart job from its submission to its end, in seconds [default: 90]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -l allow-unit -d 'Only let policies touch units matching this glob (e.g. \'web-*\', \'nginx.service\'); repeatable, adds to the configuration file\'s; other units are denied' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -l provider -d 'How systemd is asked: auto (over D-Bus when the system bus and systemd on it answer: status, jobs on systemd\'s job engine, unit files; else with systemctl) or systemctl (always the design\'s systemctl commands, one job at a time) [default: auto]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -l json -d 'Print one JSON document'
complete -c policy-host -n "__fish_policy_host_using_subcommand status" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand facts" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand facts" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand facts" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand facts" -l json -d 'Print one JSON document: {"facts": every fact policies see, "labels": the labels alone}'
complete -c policy-host -n "__fish_policy_host_using_subcommand facts" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l registry-ca -d 'A PEM file of certificate authorities trusted for registries, besides the system\'s' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l insecure-registry -d 'A registry spoken to over plain HTTP, without TLS (a test or an isolated network only); repeatable, adds to the configuration file\'s' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l registry-auth -d 'The Docker config.json holding registry logins (its "auths" entries, as `docker login` writes them); without it, $DOCKER_CONFIG/config.json, else /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l registry-timeout -d 'The longest one registry request may take, in seconds (never past the run\'s wall clock) [default: 30]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -l allow-unsigned -d 'Push a file with no FILE.minisig, or one signed under another name than the repository binds (hosts refuse it: for a test registry only)'
complete -c policy-host -n "__fish_policy_host_using_subcommand push" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l trusted-key -d 'A trusted public key file (minisign format). Repeatable. When none is given, every *.pub file in --trusted-keys-dir is trusted' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l trusted-keys-dir -d 'The system directory of trusted *.pub keys, used when no --trusted-key is given [default: /etc/policy-host/trusted-keys]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l state-dir -d 'Where the host keeps what it must remember between runs (root-only): the newest signed version of each policy and settings file accepted, for rollback protection (versions.json), and what each service\'s file# and package# subscriptions last saw (subscriptions.json) [default: /var/lib/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l registry-ca -d 'A PEM file of certificate authorities trusted for registries, besides the system\'s' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l insecure-registry -d 'A registry spoken to over plain HTTP, without TLS (a test or an isolated network only); repeatable, adds to the configuration file\'s' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l registry-auth -d 'The Docker config.json holding registry logins (its "auths" entries, as `docker login` writes them); without it, $DOCKER_CONFIG/config.json, else /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l registry-timeout -d 'The longest one registry request may take, in seconds (never past the run\'s wall clock) [default: 30]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand verify" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l trusted-key -d 'A trusted public key file (minisign format). Repeatable. When none is given, every *.pub file in --trusted-keys-dir is trusted' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l trusted-keys-dir -d 'The system directory of trusted *.pub keys, used when no --trusted-key is given [default: /etc/policy-host/trusted-keys]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l cache-dir -d 'Where compiled policies are cached (root-only; unsafe entries are ignored and rebuilt) [default: /var/cache/policy-host]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l registry-ca -d 'A PEM file of certificate authorities trusted for registries, besides the system\'s' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l insecure-registry -d 'A registry spoken to over plain HTTP, without TLS (a test or an isolated network only); repeatable, adds to the configuration file\'s' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l registry-auth -d 'The Docker config.json holding registry logins (its "auths" entries, as `docker login` writes them); without it, $DOCKER_CONFIG/config.json, else /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l registry-timeout -d 'The longest one registry request may take, in seconds (never past the run\'s wall clock) [default: 30]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand compile" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand compose" -s o -l out -d 'Where to write the policy (unsigned: sign it next)' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compose" -l engine -d 'The engine component [default: /usr/lib/policy-host/declaration-engine.wasm, which the package installs; from a checkout: target/wasm32-wasip2/release/declaration_engine.wasm]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand compose" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand compose" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand compose" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand new-policy" -l name -d 'The crate name [default: the directory\'s name]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand new-policy" -l sdk-path -d 'A guest-sdk checkout for the new policy to depend on, for SDK development [default: a copy of the guest-sdk this host ships, written to DIR/vendor]. Rust only' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand new-policy" -l lang -d 'The language the policy is written in: rust (a crate on guest-sdk), or python or js (a declaration, made one policy with the engine by `policy-host compose`)' -r -f -a "rust\t'A crate on guest-sdk'
python\t'A declaration built by componentize-py'
js\t'A declaration built by componentize-qjs'"
complete -c policy-host -n "__fish_policy_host_using_subcommand new-policy" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand new-policy" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand new-policy" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l trusted-key -d 'A trusted public key file (minisign format). Repeatable. When none is given, every *.pub file in --trusted-keys-dir is trusted' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l trusted-keys-dir -d 'The system directory of trusted *.pub keys, used when no --trusted-key is given [default: /etc/policy-host/trusted-keys]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l config -d 'The host configuration file: every setting of the host by its key [default: /etc/policy-host/host.toml, when it exists]' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l registry-ca -d 'A PEM file of certificate authorities trusted for registries, besides the system\'s' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l insecure-registry -d 'A registry spoken to over plain HTTP, without TLS (a test or an isolated network only); repeatable, adds to the configuration file\'s' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l registry-auth -d 'The Docker config.json holding registry logins (its "auths" entries, as `docker login` writes them); without it, $DOCKER_CONFIG/config.json, else /etc/policy-host/docker/config.json when it exists, else ~/.docker/config.json' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l registry-timeout -d 'The longest one registry request may take, in seconds (never past the run\'s wall clock) [default: 30]' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -l json -d 'Print one JSON document'
complete -c policy-host -n "__fish_policy_host_using_subcommand inspect" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand completions" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand completions" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand completions" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand man" -l out-dir -d 'Write NAME.8 and NAME-SUBCOMMAND.8 into DIR instead' -r -F
complete -c policy-host -n "__fish_policy_host_using_subcommand man" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand man" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand man" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand config-template" -l log-format -d 'How diagnostics on stderr are written' -r -f -a "human\t''
json\t''"
complete -c policy-host -n "__fish_policy_host_using_subcommand config-template" -l log-level -d 'The least severe diagnostics shown (error, warn, info, debug, trace); RUST_LOG overrides it' -r
complete -c policy-host -n "__fish_policy_host_using_subcommand config-template" -s h -l help -d 'Print help'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "run" -d 'Apply a policy to this machine (or show what would change, with --noop)'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "watch" -d 'Keep applying policies: one full run, then a run of the policies concerned whenever a unit, file or document they depend on changes (until SIGTERM). Takes the policies and settings `run` takes; it prints no report (a line per resource changed or failed) and --refresh counts for its first run only. Root only; only systemd wakes it'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "pause" -d 'Leave units alone (all of them, when none is named): timer and watch runs refuse their changes and say "paused" until `policy-host resume` or the time given. Root only'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "resume" -d 'End pauses (all of them, when no unit is named): the next run repairs the units'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "keygen" -d 'Generate a minisign key pair for signing policies'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "sign" -d 'Sign a policy: writes POLICY.wasm.minisig beside it'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "status" -d 'Show units as the host reads them (is-active and is-enabled words), over D-Bus or systemctl'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "facts" -d 'Show what policies are told about this machine: the facts the host gathers (host name, OS, architecture, CPUs, memory, versions), then the labels host.toml gives it'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "push" -d 'Push a signed policy or settings document to an OCI registry, with its signature'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "verify" -d 'Check a policy\'s signature against trusted keys (exit 0 valid; 1 invalid, or valid but refused by this machine\'s rollback record: older than what it accepted, or undated)'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "compile" -d 'Compile signed policies into the compile cache now (each signature checked first), so that no run pays a cold compile: worth it for large policies (Python, JavaScript)'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "compose" -d 'Make one policy of a declaration (a Python or JavaScript policy\'s component) and the engine that applies it: the component model\'s composition. Sign the result'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "new-policy" -d 'Create a new policy crate: a policy with one service, a native test, a build command'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "inspect" -d 'Show a policy\'s size, SHA-256, world, imports and exports, and signature'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "man" -d 'Print the man page (roff), generated from this command line; with --out-dir, write one page per subcommand too'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "config-template" -d 'Print a host.toml with every setting, commented and explained (the packaged default)'
complete -c policy-host -n "__fish_policy_host_using_subcommand help; and not __fish_seen_subcommand_from run watch pause resume keygen sign status facts push verify compile compose new-policy inspect completions man config-template help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
