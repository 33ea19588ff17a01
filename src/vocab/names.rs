//! Validated names. A backend name becomes the prefix of every tool it
//! exposes (`{backend}__{tool}`), so it must not contain the separator
//! itself, nor start or end with `_` (which would make `a___b` ambiguous).
//! A namespace name appears in URL paths (`/ns/{namespace}/mcp`). A
//! principal's name (a static token's, `NAME=TOKEN`) appears in logs, in
//! `sluice check` and as a config key (`token_scopes`), so it is as plain,
//! with `.` besides (`alice.ops`); never `#`, which positional `token#N`
//! displays use, so a name can never be taken for a position.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

const MAX_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} name `{name}`: {reason}")]
pub struct InvalidName {
    kind: &'static str,
    name: String,
    reason: &'static str,
}

fn check_chars(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_LEN {
        return Err("must be 1-64 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err("may contain only A-Z, a-z, 0-9, `_` and `-`");
    }
    Ok(())
}

fn check_backend(name: &str) -> Result<(), &'static str> {
    check_chars(name)?;
    if name.contains("__") {
        return Err("must not contain `__` (the tool prefix separator)");
    }
    if name.starts_with('_') || name.ends_with('_') {
        return Err("must not start or end with `_`");
    }
    Ok(())
}

fn check_principal(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_LEN {
        return Err("must be 1-64 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err("may contain only A-Z, a-z, 0-9, `_`, `-` and `.`");
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $ty:ident, $kind:literal, $check:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $ty(Arc<str>);

        impl $ty {
            pub fn new(name: &str) -> Result<Self, InvalidName> {
                match $check(name) {
                    Ok(()) => Ok(Self(Arc::from(name))),
                    Err(reason) => Err(InvalidName {
                        kind: $kind,
                        name: name.to_owned(),
                        reason,
                    }),
                }
            }

            /// Whether `name` is one that `new` takes.
            pub fn is_valid(name: &str) -> bool {
                $check(name).is_ok()
            }

            /// For names known valid at compile time.
            #[allow(dead_code, reason = "not every kind of name has a built-in one")]
            pub(crate) fn trusted(name: &'static str) -> Self {
                debug_assert!($check(name).is_ok(), "invalid built-in name {name}");
                Self(Arc::from(name))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $ty {
            type Err = InvalidName;
            fn from_str(s: &str) -> Result<Self, InvalidName> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        // Sound because Eq, Ord and Hash are derived from the inner `str`,
        // which lets maps keyed by name be queried with a plain `&str`.
        impl Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// A configured backend; cheap to clone.
    BackendName,
    "backend",
    check_backend
);
name_type!(
    /// A configured namespace; cheap to clone.
    NamespaceName,
    "namespace",
    check_chars
);
name_type!(
    /// A static token's principal, named in `bearer_tokens_env`
    /// (`NAME=TOKEN`): what `token_scopes`, the audit trail and `sluice
    /// check` call it, whatever its position; cheap to clone.
    PrincipalName,
    "principal",
    check_principal
);

/// Replicas tell each other which client a message is for (`ClientKey`):
/// a principal's name goes as its text, and is checked again on arrival.
impl serde::Serialize for PrincipalName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for PrincipalName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        PrincipalName::new(&text).map_err(serde::de::Error::custom)
    }
}
