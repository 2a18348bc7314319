//! Request-derived text as the log shows it (docs/dashboard.md, "Security model"): a path segment, a
//! note, an actor's name or an error naming them is written with its control characters (newline, CR,
//! ESC, the C1 controls, DEL) and bidirectional overrides as Rust escapes (`\n`, `\u{1b}`), so that a
//! `%0A` in a URL cannot forge a log line and an ESC sequence cannot reach the operator's terminal.

use std::fmt;

/// `text` shown escaped by its `Display`: `module = %Escaped(&module)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Escaped<'a>(pub(super) &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\\' => f.write_str("\\\\")?,
                c if unsafe_char(c) => write!(f, "\\u{{{:x}}}", u32::from(c))?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

/// A character a terminal acts on rather than shows: the C0 and C1 controls, DEL, and the bidirectional
/// embeddings, overrides and isolates (which reorder what follows them).
fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::Escaped;

    #[test]
    fn control_characters_are_shown_escaped() {
        let shown = |text: &str| Escaped(text).to_string();
        assert_eq!(shown("billing::send"), "billing::send");
        assert_eq!(
            shown("a\nINFO forged\r\u{1b}[31mred\u{7}\u{9b}\u{7f}\u{202e}"),
            "a\\nINFO forged\\r\\u{1b}[31mred\\u{7}\\u{9b}\\u{7f}\\u{202e}"
        );
        // A backslash is escaped too, so that `\n` typed as two characters reads apart from a newline.
        assert_eq!(shown("a\\nb"), "a\\\\nb");
        assert_eq!(shown("naïve ✓"), "naïve ✓");
    }
}
