//! Reading the formats the facts come in: os-release, /etc/hosts, the
//! kernel's CPU lists and meminfo, machine names. Pure functions of text,
//! so each rule is tested on the text itself; where the text comes from is
//! [`super::gather`]'s job. Each returns `None` (or leaves a key out) for
//! what it cannot read, never a guess.

use std::collections::BTreeMap;

/// The assignments of an os-release file (os-release(5)): `KEY=VALUE`
/// lines, blank lines and `#` comments ignored, values unquoted or in
/// single or double quotes with shell backslash escapes. A line that is
/// not an assignment, or whose quote is never closed, is left out; a key
/// given twice keeps its last value, as a shell would.
pub(super) fn os_release(text: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, raw)) = line.split_once('=') else {
            continue;
        };
        let key_ok = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if let (true, Some(value)) = (key_ok, shell_word(raw)) {
            values.insert(key.to_owned(), value);
        }
    }
    values
}

/// One shell word, as `sh` reads the right side of an assignment: quotes
/// removed, `\` escaping the next character outside quotes and `"`, `\`,
/// `$` or `` ` `` inside double quotes; single quotes take everything
/// literally. Ends at unquoted whitespace (a comment may follow). `None`
/// when a quote is left open or the text ends in a lone `\`.
fn shell_word(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => out.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        c @ ('"' | '\\' | '$' | '`') => out.push(c),
                        c => {
                            out.push('\\');
                            out.push(c);
                        }
                    },
                    c => out.push(c),
                }
            },
            '\\' => out.push(chars.next()?),
            c if c.is_whitespace() => break,
            c => out.push(c),
        }
    }
    Some(out)
}

/// The fully qualified name /etc/hosts gives `hostname`, as `hostname -f`
/// finds it with local files only: the first line (comments stripped, a
/// valid address first) that lists `hostname` among its names, compared
/// without case as the resolver does. Its canonical (first) name when that
/// has a dot in it; else `None` (the caller keeps the host name).
pub(super) fn fqdn_from_hosts(text: &str, hostname: &str) -> Option<String> {
    if hostname.is_empty() {
        return None;
    }
    let names = text.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let address = fields.next()?;
        address.parse::<std::net::IpAddr>().ok()?;
        let names: Vec<&str> = fields.collect();
        names
            .iter()
            .any(|n| n.eq_ignore_ascii_case(hostname))
            .then_some(names)
    })?;
    let canonical = names.first()?;
    canonical.contains('.').then(|| (*canonical).to_owned())
}

/// How many CPUs a kernel CPU list names (`0-3,8` is 5), as
/// `/sys/devices/system/cpu/online` writes it; `None` for anything else.
pub(super) fn cpu_count(list: &str) -> Option<usize> {
    let list = list.trim();
    if list.is_empty() {
        return None;
    }
    list.split(',').try_fold(0usize, |count, part| {
        let n = match part.split_once('-') {
            None => {
                part.parse::<usize>().ok()?;
                1
            }
            Some((first, last)) => {
                let (first, last) = (first.parse::<usize>().ok()?, last.parse::<usize>().ok()?);
                last.checked_sub(first)? + 1
            }
        };
        count.checked_add(n)
    })
}

/// `MemTotal` of `/proc/meminfo` (in kB, that is KiB) in whole MiB.
pub(super) fn memory_mib(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let mut fields = line.split_whitespace();
    let kib: u64 = fields.next()?.parse().ok()?;
    (fields.next() == Some("kB")).then_some(kib / 1024)
}

/// Debian's name of the architecture the kernel calls `machine` (`uname
/// -m`): `x86_64` is `amd64`. A machine Debian has no other name for is
/// given as the kernel says it. Also reads Rust's names of a build target
/// (`x86`, `arm`, `powerpc64`), for when the kernel cannot be asked.
pub(super) fn debian_arch(machine: &str) -> String {
    match machine {
        "x86_64" => "amd64",
        "aarch64" | "arm64" => "arm64",
        "i386" | "i486" | "i586" | "i686" | "x86" => "i386",
        "armv7l" | "armv8l" | "arm" => "armhf",
        "ppc64le" => "ppc64el",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64el",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        "loongarch64" => "loong64",
        "mips64" => "mips64el",
        other => other,
    }
    .to_owned()
}

/// The first number in systemd's version (`252` of `252.22-1~deb12u1`,
/// `256` of `v256-rc3`); `None` when it has none.
pub(super) fn first_number(version: &str) -> Option<String> {
    let start = version.find(|c: char| c.is_ascii_digit())?;
    let digits: String = version[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_reads_quotes_escapes_and_comments() {
        let text = r#"
# a comment, then the usual lines
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME='Debian GNU/Linux'
VERSION_ID="12"
ID=debian
  # an indented comment
VERSION_CODENAME=bookworm # a comment after the value
HOME_URL="https://www.debian.org/"
QUOTED="a \"quoted\" \$word and \\ and \n kept"
SINGLE='no \escapes here'
MIXED=a\ b"c d"'e'
not an assignment
BROKEN="never closed
lower=x
"#;
        let values = os_release(text);
        assert_eq!(values["ID"], "debian");
        assert_eq!(values["VERSION_ID"], "12");
        assert_eq!(values["VERSION_CODENAME"], "bookworm");
        assert_eq!(values["NAME"], "Debian GNU/Linux");
        assert_eq!(values["PRETTY_NAME"], "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(values["QUOTED"], r#"a "quoted" $word and \ and \n kept"#);
        assert_eq!(values["SINGLE"], r"no \escapes here");
        assert_eq!(values["MIXED"], "a bc de");
        assert_eq!(values["lower"], "x");
        assert!(!values.contains_key("BROKEN"), "{values:?}");
        assert!(!values.keys().any(|k| k.contains(' ')), "{values:?}");
    }

    #[test]
    fn os_release_keeps_the_last_of_a_key_and_empty_values() {
        let values = os_release("ID=first\nID=\"second\"\nVERSION_ID=\n");
        assert_eq!(values["ID"], "second");
        assert_eq!(values["VERSION_ID"], "");
    }

    #[test]
    fn the_fqdn_is_the_canonical_name_of_the_first_line_listing_the_host() {
        let hosts = "\
127.0.0.1\tlocalhost
# 127.0.1.1 web1.old.example web1
::1 localhost ip6-localhost
127.0.1.1   web1.example.com web1   # the Debian installer's line
10.0.0.5    web1.other.example web1
";
        assert_eq!(
            fqdn_from_hosts(hosts, "web1").as_deref(),
            Some("web1.example.com")
        );
        assert_eq!(
            fqdn_from_hosts(hosts, "WEB1").as_deref(),
            Some("web1.example.com"),
            "names compare without case"
        );
        // Listed, but the canonical name has no dot: the host name stays.
        assert_eq!(
            fqdn_from_hosts("127.0.1.1 db1 db1.example.com\n", "db1"),
            None
        );
        // Not listed at all, or only in a comment.
        assert_eq!(fqdn_from_hosts(hosts, "db1"), None);
        assert_eq!(
            fqdn_from_hosts("#127.0.1.1 db1.example.com db1\n", "db1"),
            None
        );
        // A line whose first field is no address is not a hosts line.
        assert_eq!(fqdn_from_hosts("db1.example.com db1\n", "db1"), None);
        assert_eq!(fqdn_from_hosts(hosts, ""), None);
    }

    #[test]
    fn cpu_lists_count_ranges_and_single_cpus() {
        assert_eq!(cpu_count("0\n"), Some(1));
        assert_eq!(cpu_count("0-3\n"), Some(4));
        assert_eq!(cpu_count("0-3,8\n"), Some(5));
        assert_eq!(cpu_count("0,2,4-7,9-10"), Some(8));
        for bad in ["", "\n", "a", "3-1", "0-", "-3", "0,,1", "0-3;8"] {
            assert_eq!(cpu_count(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn memory_is_memtotal_in_whole_mib() {
        let meminfo = "MemTotal:       16318412 kB\nMemFree:          524288 kB\n";
        assert_eq!(memory_mib(meminfo), Some(15935));
        assert_eq!(memory_mib("MemFree: 1024 kB\n"), None);
        assert_eq!(memory_mib("MemTotal: lots kB\n"), None);
        assert_eq!(memory_mib("MemTotal: 2048 MB\n"), None, "only kB is known");
        assert_eq!(memory_mib("MemTotal: 1023 kB\n"), Some(0));
    }

    #[test]
    fn kernel_machines_get_debians_names() {
        for (machine, debian) in [
            ("x86_64", "amd64"),
            ("aarch64", "arm64"),
            ("i386", "i386"),
            ("i486", "i386"),
            ("i586", "i386"),
            ("i686", "i386"),
            ("armv7l", "armhf"),
            ("armv8l", "armhf"),
            ("ppc64le", "ppc64el"),
            ("s390x", "s390x"),
            ("riscv64", "riscv64"),
            ("loongarch64", "loong64"),
            ("mips64", "mips64el"),
            ("sparc64", "sparc64"),
            ("armv6l", "armv6l"),
        ] {
            assert_eq!(debian_arch(machine), debian, "{machine}");
        }
    }

    #[test]
    fn systemds_version_is_its_first_number() {
        assert_eq!(first_number("252.22-1~deb12u1").as_deref(), Some("252"));
        assert_eq!(first_number("252").as_deref(), Some("252"));
        assert_eq!(first_number("v256-rc3").as_deref(), Some("256"));
        assert_eq!(first_number("unknown"), None);
        assert_eq!(first_number(""), None);
    }
}
