//! Text from the database, a file or the command line made safe to print on a terminal: every
//! control character (ESC, CR, BEL, backspace, newline, the C1 controls, DEL) and every bidirectional
//! override is shown as a Rust escape (`\u{1b}`, `\r`), so that a name, a note or an error text cannot
//! move the cursor, rewrite a line or retitle the window (docs/operations.md, "Text from the rows is shown escaped").
//! `--json` needs none of this: JSON escapes control characters itself.

use std::borrow::Cow;

/// `text` with its control characters escaped: for one value (a name, a cell, a note, a message).
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if unsafe_char(c) => shown.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

/// [`escape`] on each line of a text of several lines (a rendered schema, a diagnostic), keeping its
/// newlines.
pub fn escape_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && unsafe_char(c)) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.split('\n').map(escape).collect::<Vec<_>>().join("\n"))
}

/// A character a terminal acts on rather than shows: the C0 and C1 controls, DEL, and the bidirectional
/// embeddings, overrides and isolates (which reorder what follows them).
fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::{escape, escape_lines};

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(escape("billing::send"), "billing::send");
        assert_eq!(
            escape("a\u{1b}]0;owned\u{7}b\r\n\tc\u{9b}d\u{7f}\u{202e}"),
            "a\\u{1b}]0;owned\\u{7}b\\r\\n\\tc\\u{9b}d\\u{7f}\\u{202e}"
        );
        assert_eq!(escape("naïve ✓"), "naïve ✓");
        assert_eq!(escape_lines("a\u{1b}[2J\nb\r\n"), "a\\u{1b}[2J\nb\\r\n");
    }
}
