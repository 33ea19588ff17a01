//! Every key the file stage accepts, read from the serde types themselves
//! (a derived `Deserialize` names its fields to `deserialize_struct`), so
//! the documentation test cannot miss a key someone adds.

use serde::Deserialize;
use serde::de::{self, Visitor};

use super::file;

/// (table, its keys) for every table of the TOML form; `NAME` stands for
/// a backend's or namespace's name.
pub fn accepted() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("", fields::<file::File>()),
        ("server", fields::<file::FileServer>()),
        ("server.tls", fields::<file::FileTls>()),
        ("auth", fields::<file::FileAuth>()),
        ("auth.oauth", fields::<file::FileOAuth>()),
        ("metrics", fields::<file::FileMetrics>()),
        ("limits", fields::<file::FileLimits>()),
        ("cluster", fields::<file::FileCluster>()),
        ("tracing", fields::<file::FileTracing>()),
        ("defaults", fields::<file::FileDefaults>()),
        ("defaults.sandbox", fields::<file::FileSandbox>()),
        ("backends.NAME", fields::<file::FileBackend>()),
        ("backends.NAME.tools", fields::<file::FileTools>()),
        ("backends.NAME.sandbox", fields::<file::FileSandbox>()),
        ("backends.NAME.oauth", fields::<file::FileBackendOAuth>()),
        (
            "backends.NAME.oauth.exchange",
            fields::<file::FileTokenExchange>(),
        ),
        (
            "backends.NAME.principals.PRINCIPAL",
            fields::<file::FilePrincipal>(),
        ),
        ("namespaces.NAME", fields::<file::FileNamespace>()),
    ]
}

/// The field names `T`'s derived `Deserialize` asks for.
fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut grab = Grab(None);
    let _ = T::deserialize(&mut grab);
    grab.0.unwrap_or(&[])
}

struct Grab(Option<&'static [&'static str]>);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fields read")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> de::Deserializer<'de> for &mut Grab {
    type Error = Stop;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        self.0 = Some(fields);
        Err(Stop)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}
