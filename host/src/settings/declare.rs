//! How an option is declared: [`settings!`] takes each option once, as a
//! typed field, and generates from it the command-line flags (a clap
//! `Args` struct per scope), the typed values a resolution yields, and the
//! [`Setting`](super::setting::Setting) description that host.toml's reader
//! and template use.
//!
//! A field is named in code only through the generated structs, so a
//! misspelt option name is a compile error, never a run-time panic.

/// The help text clap shows for a setting: its help, and its default.
pub(super) fn help_with_default(help: &str, default: Option<&str>) -> String {
    match default {
        Some(default) => format!("{help} [default: {default}]"),
        None => help.to_owned(),
    }
}

/// Declares the settings of each scope. For a scope `Flags => Values`:
///
/// - `Flags`, a clap `Args` struct with one field per option, each holding
///   the values given on the command line;
/// - `Values`, a struct with one typed field per option (the `Out` of its
///   value kind), and `Flags::resolve(&ConfigFile) -> Values`, which reads
///   each option from the command line, then host.toml, then its default;
/// - `Flags::SETTINGS`, the options' descriptions, in declaration order.
macro_rules! settings {
    ($(
        $(#[doc = $group_doc:literal])*
        $scope:ident: $flags:ident => $values:ident {
            $(
                $field:ident: $kind:ty {
                    flag: $flag:literal,
                    key: $key:literal,
                    value_name: $value_name:literal,
                    default: $default:expr,
                    help: $help:expr $(,)?
                }
            )*
        }
    )*) => {
        $(
            $(#[doc = $group_doc])*
            #[derive(Debug, Clone, Default, clap::Args)]
            pub struct $flags {
                $(
                    #[arg(
                        long = $flag,
                        value_name = $value_name,
                        help = $crate::settings::declare::help_with_default($help, $default),
                        action = <$kind as $crate::settings::value::Value>::ACTION,
                        value_hint = <$kind as $crate::settings::value::Value>::HINT,
                    )]
                    pub $field: Vec<String>,
                )*
            }

            /// The resolved value of every option of the scope.
            #[derive(Debug, Clone)]
            pub struct $values {
                $(pub $field: <$kind as $crate::settings::value::Value>::Out,)*
            }

            impl $flags {
                /// The options of this scope, in declaration order.
                pub const SETTINGS: &'static [$crate::settings::setting::Setting] = &[$(
                    $crate::settings::setting::Setting {
                        flag: $flag,
                        key: $key,
                        value_name: $value_name,
                        help: $help,
                        default: $default,
                        kind: <$kind as $crate::settings::value::Value>::KIND,
                        scope: $crate::settings::setting::Scope::$scope,
                    },
                )*];

                /// Each option from the command line, else `file`, else its
                /// default, checked; an error names where the bad value came from.
                pub fn resolve(
                    &self,
                    file: &impl $crate::settings::value::Lookup,
                ) -> anyhow::Result<$values> {
                    let mut settings = Self::SETTINGS.iter();
                    Ok($values {$(
                        $field: <$kind as $crate::settings::value::Value>::parse(
                            $crate::settings::value::Given {
                                setting: settings.next().expect("one description per field"),
                                flags: &self.$field,
                                file: file.lookup($key),
                            },
                        )?,
                    )*})
                }
            }

            $(
                // A single value needs a default: said when this compiles.
                const _: () = assert!(
                    !<$kind as $crate::settings::value::Value>::NEEDS_DEFAULT
                        || ($default as Option<&str>).is_some(),
                    concat!("--", $flag, " takes one value and needs a default"),
                );
            )*
        )*
    };
}

pub(super) use settings;
