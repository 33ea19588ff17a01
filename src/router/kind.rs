//! The four listable things a backend offers, and where their ids live.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Tool,
    Prompt,
    Resource,
    Template,
}

impl Kind {
    pub(super) fn list_method(self) -> &'static str {
        match self {
            Kind::Tool => "tools/list",
            Kind::Prompt => "prompts/list",
            Kind::Resource => "resources/list",
            Kind::Template => "resources/templates/list",
        }
    }

    pub(super) fn from_list_method(method: &str) -> Option<Kind> {
        [Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Template]
            .into_iter()
            .find(|k| k.list_method() == method)
    }

    /// The array in a list result.
    pub(super) fn items_key(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource => "resources",
            Kind::Template => "resourceTemplates",
        }
    }

    /// The field of an item that the gateway renames.
    pub(super) fn id_key(self) -> &'static str {
        match self {
            Kind::Tool | Kind::Prompt => "name",
            Kind::Resource => "uri",
            Kind::Template => "uriTemplate",
        }
    }

    /// The server capability that announces this kind.
    pub(super) fn capability(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource | Kind::Template => "resources",
        }
    }

    pub(super) fn is_uri(self) -> bool {
        matches!(self, Kind::Resource | Kind::Template)
    }
}
