//! How a user's command line becomes the argv Flux runs, and how words are quoted into the
//! generated scripts.
//!
//! A `command` is a bash command line. It reaches Flux in one of two forms:
//! - **words**: when bash would run it as a plain external program with fixed arguments
//!   (no expansions, operators, redirections, globbing, comments or line breaks outside
//!   single quotes; no assignment, keyword or shell builtin first; quotes are fine), the line
//!   is split into words the way bash would (`shlex`), each word its own argv element:
//!   `flux submit ... hostname -f`, or `bash -c 'for i in 1 2; do ...; done'` as three words.
//! - **`bash -c`**: otherwise the line is passed unchanged as `bash -c '<command>'`, so it
//!   reaches Flux exactly as written and each task's bash interprets it.
//!
//! Either way the result is identical to what bash would do with the line; the split form only
//! avoids a shell per task and shows the real program in `flux jobs`.
//!
//! Into the scripts, every user word goes through [`quote`]: single quotes, with `'` written as
//! `'\''`. Nothing a user writes is ever interpreted by the entrypoint itself.

use std::borrow::Cow;

/// Characters that make bash do more than split words: expansions, operators, redirections,
/// globbing, history, comments, escapes, line breaks.
const SHELL_SYNTAX: &[char] = &[
    '$', '`', '\\', '|', '&', ';', '<', '>', '(', ')', '{', '}', '[', ']', '*', '?', '!', '~', '#',
    '\n', '\r',
];

/// First words that bash treats specially (reserved words and builtins without an external
/// program of the same meaning).
const SHELL_FIRST_WORDS: &[&str] = &[
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "case",
    "esac",
    "for",
    "select",
    "while",
    "until",
    "do",
    "done",
    "in",
    "function",
    "time",
    "coproc",
    "[[",
    "]]",
    "!",
    "{",
    "}",
    ".",
    ":",
    "source",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "pushd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "suspend",
    "times",
    "trap",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// Whether `word` looks like a variable assignment (`NAME=value`), which bash treats as one.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The argv for a user command line (see the module docs). `None` for a blank command.
pub fn command_argv(command: &str) -> Option<Vec<String>> {
    if command.trim().is_empty() {
        return None;
    }
    if let Some(words) = plain_words(command) {
        return Some(words);
    }
    Some(vec!["bash".into(), "-c".into(), command.to_string()])
}

/// Whether bash would do more with `command` than split it into words and remove quotes:
/// a [`SHELL_SYNTAX`] character outside quotes, or `$`, `` ` `` or `\` inside double quotes
/// (single quotes make everything literal). Unbalanced quotes count as syntax.
fn has_shell_syntax(command: &str) -> bool {
    #[derive(PartialEq)]
    enum State {
        Plain,
        Single,
        Double,
    }
    let mut state = State::Plain;
    for c in command.chars() {
        match state {
            State::Plain => match c {
                '\'' => state = State::Single,
                '"' => state = State::Double,
                c if SHELL_SYNTAX.contains(&c) => return true,
                _ => {}
            },
            State::Single => {
                if c == '\'' {
                    state = State::Plain;
                }
            }
            State::Double => match c {
                '"' => state = State::Plain,
                '$' | '`' | '\\' => return true,
                _ => {}
            },
        }
    }
    state != State::Plain
}

/// The words of a command that bash would run as a plain program, or `None`.
pub fn plain_words(command: &str) -> Option<Vec<String>> {
    if has_shell_syntax(command) {
        return None;
    }
    let words = shlex::split(command)?;
    let first = words.first()?;
    if SHELL_FIRST_WORDS.contains(&first.as_str()) || is_assignment(first) {
        return None;
    }
    Some(words)
}

/// Quotes one word for bash or POSIX sh: unchanged when it has only safe characters,
/// otherwise in single quotes. Panics never; a NUL byte (impossible in argv) is kept
/// and rejected earlier by [`check_no_nul`](crate::model::words::check_no_nul).
pub fn quote(word: &str) -> Cow<'_, str> {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+".contains(&b));
    if safe {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
    }
}

/// Quotes and joins words with spaces.
pub fn quote_all<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
