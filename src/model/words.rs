//! Text that reaches a command line: split into words as bash would (never expanded), and
//! free of NUL characters, which no argv, environment or script can carry.

/// Splits a list of options or words (`optionFlags`, `submitCommand`, `prefix`) the way bash
/// would, without any expansion. `Err` for unbalanced quotes.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    shlex::split(text)
        .ok_or_else(|| format!("cannot split {text:?} into words (unbalanced quotes?)"))
}

/// Fails when `text` contains a NUL character, which no argv or environment can carry.
pub fn check_no_nul(text: &str) -> Result<(), String> {
    if text.contains('\0') {
        Err("contains a NUL character".into())
    } else {
        Ok(())
    }
}
