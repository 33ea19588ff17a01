//! Text to search terms, the same for a tool's fields and for a query: words
//! split at anything not a letter or digit (so `snake_case`, `__`, `-`, `.`
//! and spaces all separate) and at camelCase humps (`createIssue`,
//! `HTTPServer`), lowercased, common English words dropped, and the
//! commonest endings taken off (`issues`, `creating`, `created` and
//! `create` are one term), so a user's phrasing meets a tool's.

/// Words that say nothing about which tool is meant.
const STOP: [&str; 40] = [
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
    "how", "i", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please",
    "so", "that", "the", "this", "to", "us", "we", "what", "which", "with", "you", "your",
];

/// Calls `each` with every term of `text`, in order (repeats kept: a
/// term's count in a field is its frequency).
pub(super) fn terms(text: &str, mut each: impl FnMut(&str)) {
    let mut word = String::new();
    let mut emit = |word: &mut String| {
        if !word.is_empty() {
            let lower = word.to_lowercase();
            if !STOP.contains(&lower.as_str()) {
                each(stem(&lower));
            }
            word.clear();
        }
    };
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            emit(&mut word);
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        // A hump: `aB`, or the last capital of a run before a lowercase
        // letter (`HTTPServer` is `HTTP` `Server`).
        let hump = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase() || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if hump {
            emit(&mut word);
        }
        word.push(c);
    }
    emit(&mut word);
}

/// A light suffix stemmer for English: plurals, `-ing`, `-ed` and a final
/// `e`, with a doubled consonant undone (`mapping` is `map`). Short words
/// are left alone.
fn stem(word: &str) -> &str {
    let n = word.len();
    let mut w = if n > 4 && word.ends_with("ies") {
        // `entries`: `entri`, which `entry` also becomes below.
        &word[..n - 2]
    } else if word.ends_with("sses") {
        &word[..n - 2]
    } else if n > 3
        && word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
    {
        &word[..n - 1]
    } else {
        word
    };
    let stripped = if w.len() > 5 && w.ends_with("ing") {
        w = &w[..w.len() - 3];
        true
    } else if w.len() > 4 && w.ends_with("ed") {
        w = &w[..w.len() - 2];
        true
    } else {
        false
    };
    let b = w.as_bytes();
    if stripped
        && b.len() > 3
        && b[b.len() - 1] == b[b.len() - 2]
        && !matches!(b[b.len() - 1], b'l' | b's' | b'z')
        && !is_vowel(b[b.len() - 1])
    {
        w = &w[..w.len() - 1];
    }
    if w.len() > 3 && (w.ends_with('e') || w.ends_with('y')) {
        // `create`/`creat`, `entry`/`entri`: one term each.
        w = &w[..w.len() - 1];
        if w.ends_with('i') && w.len() > 3 {
            w = &w[..w.len() - 1];
        }
    } else if w.len() > 3 && w.ends_with('i') {
        w = &w[..w.len() - 1];
    }
    w
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        terms(text, |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn names_split_into_words() {
        assert_eq!(all("github__create_issue"), ["github", "creat", "issu"]);
        assert_eq!(all("getFileContents"), ["get", "fil", "content"]);
        assert_eq!(
            all("HTTPServer.list-items"),
            ["http", "server", "list", "item"]
        );
        assert_eq!(all("s3_put_object v2"), ["s3", "put", "object", "v2"]);
    }

    #[test]
    fn phrasings_meet() {
        for (a, b) in [
            ("creating", "create"),
            ("created", "creates"),
            ("issues", "issue"),
            ("entries", "entry"),
            ("mapping", "map"),
            ("directories", "directory"),
            ("deleting", "delete"),
            ("files", "file"),
        ] {
            assert_eq!(all(a), all(b), "{a} / {b}");
        }
        assert!(
            all("Please list the files in my folder")
                .iter()
                .all(|t| t != "the" && t != "my")
        );
    }
}
