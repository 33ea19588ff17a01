//! The retrieval check: requests as a user would put them to a model,
//! each with the tool of the real servers (server-everything,
//! server-filesystem, server-memory, prefixed by backend) that should
//! answer it. Written from the tools' purposes, not their descriptions'
//! wording; some are hard on purpose (a relation asked for by example).

pub(crate) const QUERIES: [(&str, &str); 45] = [
    ("repeat back the text I give you", "everything__echo"),
    ("add two numbers together", "everything__get-sum"),
    (
        "what environment variables is the server running with",
        "everything__get-env",
    ),
    ("show me a small image", "everything__get-tiny-image"),
    (
        "compress a file with gzip",
        "everything__gzip-file-as-resource",
    ),
    (
        "turn on random log messages",
        "everything__toggle-simulated-logging",
    ),
    (
        "start sending resource update notifications",
        "everything__toggle-subscriber-updates",
    ),
    (
        "run a slow operation that reports progress",
        "everything__trigger-long-running-operation",
    ),
    (
        "do deep research on a topic",
        "everything__simulate-research-query",
    ),
    (
        "return content that comes with an output schema",
        "everything__get-structured-content",
    ),
    (
        "give me links to some resources",
        "everything__get-resource-links",
    ),
    (
        "get a reference to one resource",
        "everything__get-resource-reference",
    ),
    (
        "a message carrying annotations metadata",
        "everything__get-annotated-message",
    ),
    (
        "read the contents of a text file",
        "filesystem__read_text_file",
    ),
    (
        "open a picture file and return it as base64",
        "filesystem__read_media_file",
    ),
    (
        "read several files at once",
        "filesystem__read_multiple_files",
    ),
    ("save this text to a new file", "filesystem__write_file"),
    ("change a few lines in a file", "filesystem__edit_file"),
    ("make a new folder", "filesystem__create_directory"),
    (
        "what files are in this directory",
        "filesystem__list_directory",
    ),
    (
        "list the files with their sizes",
        "filesystem__list_directory_with_sizes",
    ),
    (
        "show the whole folder hierarchy as a tree",
        "filesystem__directory_tree",
    ),
    ("rename a file", "filesystem__move_file"),
    (
        "find files matching a glob pattern",
        "filesystem__search_files",
    ),
    (
        "when was this file last modified and how big is it",
        "filesystem__get_file_info",
    ),
    (
        "which directories am I allowed to access",
        "filesystem__list_allowed_directories",
    ),
    (
        "overwrite an existing file with new content",
        "filesystem__write_file",
    ),
    (
        "move a document into another directory",
        "filesystem__move_file",
    ),
    (
        "remember a new person and a project as entities",
        "memory__create_entities",
    ),
    (
        "record that Alice works at Acme",
        "memory__create_relations",
    ),
    (
        "add facts about an existing entity",
        "memory__add_observations",
    ),
    ("forget these entities entirely", "memory__delete_entities"),
    (
        "remove one observation from an entity",
        "memory__delete_observations",
    ),
    (
        "delete the relation between two entities",
        "memory__delete_relations",
    ),
    ("dump the entire knowledge graph", "memory__read_graph"),
    (
        "search the knowledge graph for nodes about databases",
        "memory__search_nodes",
    ),
    ("open the nodes named Alice and Bob", "memory__open_nodes"),
    (
        "link two entities with a relation",
        "memory__create_relations",
    ),
    (
        "look up what I stored in memory about my dentist",
        "memory__search_nodes",
    ),
    ("echo a message", "everything__echo"),
    ("the sum of 3 and 4", "everything__get-sum"),
    ("edit a file and show me the diff", "filesystem__edit_file"),
    (
        "get the metadata and permissions of a file",
        "filesystem__get_file_info",
    ),
    (
        "create several new entities in the knowledge graph",
        "memory__create_entities",
    ),
    (
        "a tree view of a directory as JSON",
        "filesystem__directory_tree",
    ),
];
